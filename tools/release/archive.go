package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// archiveFile is one file of a release archive: its name inside the
// archive's top directory and where it comes from.
type archiveFile struct {
	name string // inside sidemirror_<version>_<os>_<arch>/
	src  string // absolute path
	mode int64
}

// archiveFiles lists the archive's content: the binaries, the systemd unit
// and its environment file, the example config and the README.
func archiveFiles(o options, binDir string) []archiveFile {
	files := []archiveFile{
		{"sidemirror.service", filepath.Join(o.repo, unitSource), 0o644},
		{"sidemirror.env", filepath.Join(o.repo, envSource), 0o644},
		{"sidecar.properties", filepath.Join(o.repo, configSource), 0o644},
		{"README.md", filepath.Join(o.repo, "README.md"), 0o644},
	}
	for _, b := range binaries {
		files = append(files, archiveFile{b.name, filepath.Join(binDir, b.name), 0o755})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files
}

// writeArchive writes sidemirror_<version>_<os>_<arch>.tar.gz: one top
// directory, files in sorted order, owned by root, every time stamp o.date,
// and a gzip header with neither name nor time.
func writeArchive(o options, t target, binDir string) (string, error) {
	top := fmt.Sprintf("sidemirror_%s_%s_%s", o.version, t.os, t.arch)
	name := top + ".tar.gz"
	f, err := os.Create(filepath.Join(o.out, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(zw)
	hdr := func(name string, mode, size int64, typ byte) *tar.Header {
		return &tar.Header{
			Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: o.date,
			Uname: "root", Gname: "root", Format: tar.FormatPAX,
		}
	}
	if err := tw.WriteHeader(hdr(top+"/", 0o755, 0, tar.TypeDir)); err != nil {
		return "", err
	}
	for _, af := range archiveFiles(o, binDir) {
		if err := addFile(tw, hdr(top+"/"+af.name, af.mode, 0, tar.TypeReg), af.src); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return name, f.Close()
}

func addFile(tw *tar.Writer, h *tar.Header, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}
