package main

import (
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Sources in the repository of what the packages install.
const (
	unitSource   = "deploy/systemd/sidemirror.service"
	envSource    = "deploy/systemd/sidemirror.env"
	configSource = "deploy/examples/sidecar.properties"
)

// Where the packages install them. The unit's ExecStart names binDest.
const (
	binDest    = "/usr/bin"
	unitDest   = "/usr/lib/systemd/system/sidemirror.service"
	configDir  = "/etc/sidemirror"
	configDest = configDir + "/sidecar.properties"
	// The unit reads both; each package ships the one of its distribution.
	debEnvDest = "/etc/default/sidemirror"
	rpmEnvDest = "/etc/sysconfig/sidemirror"
)

// Maintainer scripts, for dpkg ($1 = install, upgrade, remove, purge, ...)
// and rpm ($1 = number of versions installed after the transaction). They
// create the sidemirror system user, tell systemd about the unit and stop
// the service on removal. They neither enable nor start it: the example
// config needs local.broker.id and raft.peers of this host first.
const (
	preInstall = `#!/bin/sh
set -e
if ! getent group sidemirror >/dev/null; then
	groupadd --system sidemirror
fi
if ! getent passwd sidemirror >/dev/null; then
	useradd --system --gid sidemirror --home-dir /var/lib/sidemirror --no-create-home \
		--shell /usr/sbin/nologin --comment "sidemirror Kafka mirroring sidecar" sidemirror
fi
`
	postInstall = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
case "$1" in
configure|1)
	echo "sidemirror: edit /etc/sidemirror/sidecar.properties, then: systemctl enable --now sidemirror"
	;;
esac
`
	preRemove = `#!/bin/sh
set -e
case "$1" in
remove|0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now sidemirror.service >/dev/null 2>&1 || true
	fi
	;;
esac
`
	postRemove = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
`
)

// packageInfo describes the .deb and .rpm packages of target t.
func packageInfo(o options, t target, binDir, format, scriptDir string) *nfpm.Info {
	// useradd and groupadd, for the preinstall script.
	depends := map[string][]string{"deb": {"passwd"}, "rpm": {"shadow-utils"}}[format]
	owned := func(mode os.FileMode, group string) *files.ContentFileInfo {
		return &files.ContentFileInfo{Owner: "root", Group: group, Mode: mode, MTime: o.date}
	}
	contents := files.Contents{
		{Destination: configDir, Type: files.TypeDir, FileInfo: owned(0o750, "sidemirror")},
		{Source: filepath.Join(o.repo, configSource), Destination: configDest,
			Type: files.TypeConfigNoReplace, FileInfo: owned(0o640, "sidemirror")},
		{Source: filepath.Join(o.repo, envSource), Destination: debEnvDest, Packager: "deb",
			Type: files.TypeConfigNoReplace, FileInfo: owned(0o644, "root")},
		{Source: filepath.Join(o.repo, envSource), Destination: rpmEnvDest, Packager: "rpm",
			Type: files.TypeConfigNoReplace, FileInfo: owned(0o644, "root")},
		{Source: filepath.Join(o.repo, unitSource), Destination: unitDest, FileInfo: owned(0o644, "root")},
	}
	for _, b := range binaries {
		contents = append(contents, &files.Content{
			Source: filepath.Join(binDir, b.name), Destination: binDest + "/" + b.name,
			FileInfo: owned(0o755, "root"),
		})
	}
	dir := scriptDir
	return &nfpm.Info{
		Name:          "sidemirror",
		Arch:          t.arch,
		Platform:      t.os,
		Version:       packageVersion(o.version),
		VersionSchema: "none",
		Release:       "1",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "sidemirror maintainers <sidemirror@users.noreply.github.com>",
		Vendor:        "sidemirror",
		Homepage:      "https://github.com/sidemirror/sidemirror",
		Description: "Kafka cluster mirroring sidecar for stock Apache Kafka\n" +
			"sidemirror runs next to every broker of a destination Kafka cluster and\n" +
			"mirrors topics of a source cluster at identical offsets (KIP-1279).",
		MTime: o.date,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Depends:  depends,
			Scripts: nfpm.Scripts{
				PreInstall:  filepath.Join(dir, "preinstall.sh"),
				PostInstall: filepath.Join(dir, "postinstall.sh"),
				PreRemove:   filepath.Join(dir, "preremove.sh"),
				PostRemove:  filepath.Join(dir, "postremove.sh"),
			},
			RPM: nfpm.RPM{BuildHost: "sidemirror", Group: "Applications/System",
				Summary: "Kafka cluster mirroring sidecar for stock Apache Kafka"},
		},
	}
}

// writeScripts writes the maintainer scripts into dir, where packageInfo
// names them.
func writeScripts(dir string) error {
	for name, body := range map[string]string{
		"preinstall.sh": preInstall, "postinstall.sh": postInstall,
		"preremove.sh": preRemove, "postremove.sh": postRemove,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// writePackage writes the package of format (deb or rpm) for t.
func writePackage(o options, t target, binDir, format string) (string, error) {
	dir, err := os.MkdirTemp("", "sidemirror-scripts-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := writeScripts(dir); err != nil {
		return "", err
	}
	info := packageInfo(o, t, binDir, format, dir)
	pkgr, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, format); err != nil {
		return "", err
	}
	name := pkgr.ConventionalFileName(info)
	f, err := os.Create(filepath.Join(o.out, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := pkgr.Package(info, f); err != nil {
		return "", err
	}
	return name, f.Close()
}
