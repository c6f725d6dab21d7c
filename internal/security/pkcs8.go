package security

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// This file decrypts encrypted PKCS#8 private keys ("ENCRYPTED PRIVATE
// KEY", RFC 5958 with the PBES2 scheme of RFC 8018), the form Kafka accepts
// for PEM keys with ssl.key.password. OpenSSL writes it with
// `openssl pkcs8 -topk8 -v2 aes-256-cbc` and `openssl genpkey -aes256`.

var (
	oidPBES2        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1     = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC   = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
	errWrongKeyPass = errors.New("the key does not decrypt: ssl.key.password is wrong, or the key is damaged")
)

// maxPBKDF2Iterations bounds the work a key file can ask for.
const maxPBKDF2Iterations = 10_000_000

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

type encryptedPrivateKeyInfo struct {
	Algorithm     algorithmIdentifier
	EncryptedData []byte
}

type pbes2Params struct {
	KeyDerivationFunc algorithmIdentifier
	EncryptionScheme  algorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                 `asn1:"optional"`
	PRF            algorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 returns the DER PKCS#8 PrivateKeyInfo inside an encrypted
// PKCS#8 structure. Errors describe the structure, never key bytes.
func decryptPKCS8(der []byte, password string) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("the encrypted key is not an EncryptedPrivateKeyInfo structure")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("the key is encrypted with scheme %s; only PBES2 is supported (re-encrypt it: openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, errors.New("the key's PBES2 parameters do not decode")
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("the key's PBES2 key derivation %s is not supported (expected PBKDF2)", params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, errors.New("the key's PBKDF2 parameters do not decode")
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > maxPBKDF2Iterations {
		return nil, fmt.Errorf("the key's PBKDF2 iteration count %d is out of range (1 to %d)", kdf.IterationCount, maxPBKDF2Iterations)
	}
	prf, err := pbkdf2PRF(kdf.PRF.Algorithm)
	if err != nil {
		return nil, err
	}

	var newCipher func([]byte) (cipher.Block, error)
	var keyLen int
	switch scheme := params.EncryptionScheme.Algorithm; {
	case scheme.Equal(oidAES128CBC):
		newCipher, keyLen = aes.NewCipher, 16
	case scheme.Equal(oidAES192CBC):
		newCipher, keyLen = aes.NewCipher, 24
	case scheme.Equal(oidAES256CBC):
		newCipher, keyLen = aes.NewCipher, 32
	case scheme.Equal(oidDESEDE3CBC):
		newCipher, keyLen = des.NewTripleDESCipher, 24
	default:
		return nil, fmt.Errorf("the key's cipher %s is not supported (expected AES-CBC or DES-EDE3-CBC)", scheme)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("the key's PBKDF2 key length %d does not fit its cipher (%d)", kdf.KeyLength, keyLen)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return nil, errors.New("the key's cipher parameters (IV) do not decode")
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.IterationCount, keyLen)
	if err != nil {
		return nil, fmt.Errorf("deriving the key's encryption key: %w", err)
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	data := info.EncryptedData
	if len(iv) != block.BlockSize() || len(data) == 0 || len(data)%block.BlockSize() != 0 {
		return nil, errors.New("the encrypted key's IV or length does not fit its cipher")
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	// PKCS#7 padding; a wrong password shows up here (or in the DER below).
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > block.BlockSize() {
		return nil, errWrongKeyPass
	}
	for _, b := range plain[len(plain)-pad:] {
		if int(b) != pad {
			return nil, errWrongKeyPass
		}
	}
	plain = plain[:len(plain)-pad]
	var probe asn1.RawValue
	if rest, err := asn1.Unmarshal(plain, &probe); err != nil || len(rest) > 0 {
		return nil, errWrongKeyPass
	}
	return plain, nil
}

func pbkdf2PRF(oid asn1.ObjectIdentifier) (func() hash.Hash, error) {
	switch {
	case len(oid) == 0 || oid.Equal(oidHMACSHA1):
		return sha1.New, nil
	case oid.Equal(oidHMACSHA224):
		return sha256.New224, nil
	case oid.Equal(oidHMACSHA256):
		return sha256.New, nil
	case oid.Equal(oidHMACSHA384):
		return sha512.New384, nil
	case oid.Equal(oidHMACSHA512):
		return sha512.New, nil
	}
	return nil, fmt.Errorf("the key's PBKDF2 pseudo-random function %s is not supported", oid)
}
