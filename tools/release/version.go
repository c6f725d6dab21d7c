package main

import (
	"regexp"
	"strings"
)

var releaseVersion = regexp.MustCompile(`^v?([0-9]+\.[0-9]+\.[0-9]+)(.*)$`)

// packageVersion turns git describe output into a version that dpkg and rpm
// both accept and order correctly:
//
//	v1.2.0                 1.2.0
//	v1.2.0-rc1             1.2.0~rc1        (before 1.2.0)
//	v1.2.0-3-gabc1234      1.2.0+3.gabc1234 (after 1.2.0)
//	abc1234-dirty          0.0.0+git.abc1234.dirty
//
// Only letters, digits, '.', '+' and '~' remain: a '-' would start the
// Debian revision and is not allowed in an RPM version.
func packageVersion(describe string) string {
	m := releaseVersion.FindStringSubmatch(describe)
	if m == nil {
		return "0.0.0+git." + sanitize(describe)
	}
	base, rest := m[1], strings.TrimPrefix(m[2], "-")
	if rest == "" {
		return base
	}
	// git describe appends -<commits>-g<hash> (and -dirty) to the tag.
	if i := regexp.MustCompile(`(^|-)[0-9]+-g[0-9a-f]+(-dirty)?$`).FindStringIndex(rest); i != nil {
		pre, build := rest[:i[0]], strings.TrimPrefix(rest[i[0]:], "-")
		v := base
		if pre != "" {
			v += "~" + sanitize(pre)
		}
		return v + "+" + sanitize(build)
	}
	if rest == "dirty" {
		return base + "+dirty"
	}
	return base + "~" + sanitize(rest)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.':
			return r
		}
		return '.'
	}, s)
}
