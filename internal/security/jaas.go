package security

import (
	"errors"
	"strings"
)

// Login module classes of Kafka's sasl.jaas.config, by SASL mechanism.
const (
	plainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	oauthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// jaasConfig is a parsed sasl.jaas.config: one login module, its control
// flag and its options.
type jaasConfig struct {
	module  string
	flag    string
	options map[string]string
}

// parseJAAS parses Kafka's single-module JAAS string:
//
//	<login module class> <flag> [name=value | name="quoted value"]... ;
//
// Errors describe the position and never contain any part of s, which holds
// a password.
func parseJAAS(s string) (jaasConfig, error) {
	p := jaasParser{s: s}
	var j jaasConfig
	p.skipSpace()
	if j.module = p.word(isClassChar); j.module == "" {
		return j, errors.New("it does not start with a login module class")
	}
	p.skipSpace()
	j.flag = p.word(isNameChar)
	switch j.flag {
	case "required", "requisite", "sufficient", "optional":
	case "":
		return j, errors.New("the control flag is missing after the login module class")
	default:
		return j, errors.New("the control flag after the login module class is not required, requisite, sufficient or optional")
	}
	j.options = make(map[string]string)
	for {
		p.skipSpace()
		if p.eof() {
			return j, errors.New("the ';' at the end is missing")
		}
		if p.peek() == ';' {
			p.i++
			p.skipSpace()
			if !p.eof() {
				return j, errors.New("it has text after the ';' (only one login module is supported)")
			}
			return j, nil
		}
		name := p.word(isNameChar)
		if name == "" {
			return j, errors.New("an option name is malformed")
		}
		p.skipSpace()
		if p.eof() || p.peek() != '=' {
			return j, errors.New("an option has no '=' after its name")
		}
		p.i++
		p.skipSpace()
		value, err := p.value()
		if err != nil {
			return j, err
		}
		if _, dup := j.options[name]; dup {
			return j, errors.New("option " + name + " is set twice")
		}
		j.options[name] = value
	}
}

type jaasParser struct {
	s string
	i int
}

func (p *jaasParser) eof() bool  { return p.i >= len(p.s) }
func (p *jaasParser) peek() byte { return p.s[p.i] }

func (p *jaasParser) skipSpace() {
	for !p.eof() && strings.IndexByte(" \t\r\n", p.peek()) >= 0 {
		p.i++
	}
}

func (p *jaasParser) word(ok func(byte) bool) string {
	start := p.i
	for !p.eof() && ok(p.peek()) {
		p.i++
	}
	return p.s[start:p.i]
}

// value reads a quoted string (with \" \\ \n \t \r escapes) or an unquoted
// run of characters up to a blank or ';'.
func (p *jaasParser) value() (string, error) {
	if p.eof() {
		return "", errors.New("an option has no value")
	}
	if p.peek() != '"' {
		v := p.word(func(c byte) bool { return strings.IndexByte(" \t\r\n;\"", c) < 0 })
		if v == "" {
			return "", errors.New("an option has no value")
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		p.i++
		switch c {
		case '"':
			return b.String(), nil
		case '\\':
			if p.eof() {
				return "", errors.New("a quoted value is not terminated")
			}
			c = p.peek()
			p.i++
			switch c {
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			case 'r':
				c = '\r'
			}
		}
		b.WriteByte(c)
	}
	return "", errors.New("a quoted value is not terminated (missing '\"')")
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func isClassChar(c byte) bool { return isNameChar(c) || c == '$' }

// loginModuleFor returns the login module class a SASL mechanism needs.
func loginModuleFor(mechanism string) string {
	switch mechanism {
	case "PLAIN":
		return plainLoginModule
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return scramLoginModule
	case "OAUTHBEARER":
		return oauthBearerLoginModule
	}
	return ""
}
