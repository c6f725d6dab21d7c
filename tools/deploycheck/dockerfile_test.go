package deploycheck

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case
	args string
}

// parseDockerfile splits a Dockerfile into instructions as BuildKit reads
// it: comments and blank lines dropped, a trailing backslash continues the
// line, and every instruction is one Docker knows.
func parseDockerfile(t *testing.T, text string) []instruction {
	t.Helper()
	known := []string{"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
		"VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
	var out []instruction
	var cur *instruction
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == nil && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur != nil && strings.HasPrefix(trimmed, "#") {
			continue // comments inside a continued instruction
		}
		cont := strings.HasSuffix(trimmed, "\\")
		trimmed = strings.TrimSuffix(trimmed, "\\")
		if cur == nil {
			cmd, args, _ := strings.Cut(trimmed, " ")
			cur = &instruction{line: i + 1, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
			if !slices.Contains(known, cur.cmd) {
				t.Fatalf("Dockerfile:%d: unknown instruction %q", cur.line, cmd)
			}
		} else {
			cur.args += " " + trimmed
		}
		if !cont {
			cur.args = strings.Join(strings.Fields(cur.args), " ")
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		t.Fatalf("Dockerfile:%d: the last instruction ends in a continuation", cur.line)
	}
	return out
}

// The image: a build stage running tools/release (whose binaries
// TestArchive checks to be static), then a distroless or scratch stage that
// copies them from there and runs as a non-root user.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ins := parseDockerfile(t, string(data))
	if len(ins) == 0 || ins[0].cmd != "FROM" && ins[0].cmd != "ARG" {
		t.Fatal("Dockerfile: does not start with FROM (or ARG)")
	}
	type stage struct {
		name, base string
		ins        []instruction
	}
	var stages []*stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--platform=") })
			s := &stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			} else if len(f) != 1 {
				t.Fatalf("Dockerfile:%d: FROM %s: want FROM image [AS name]", in.line, in.args)
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and the image", len(stages))
	}
	names := map[string]bool{}
	builtWithRelease := false
	for _, s := range stages[:len(stages)-1] {
		names[s.name] = true
		for _, in := range s.ins {
			if in.cmd == "RUN" && regexp.MustCompile(`go run \./release .*-formats bin`).MatchString(in.args) {
				builtWithRelease = true
			}
		}
	}
	if !builtWithRelease {
		t.Error("Dockerfile: no build stage runs tools/release (go run ./release ... -formats bin): the image's binaries would not be the static release build")
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.base, "gcr.io/distroless/static") && final.base != "scratch" {
		t.Errorf("Dockerfile: the image is based on %s, want distroless/static or scratch", final.base)
	}
	var user, entrypoint string
	copied := map[string]bool{}
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "RUN":
			t.Errorf("Dockerfile:%d: RUN in the image stage (it has no shell)", in.line)
		case "COPY":
			f := strings.Fields(in.args)
			from := ""
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					from = v
				}
				f = f[1:]
			}
			if !names[from] {
				t.Errorf("Dockerfile:%d: COPY --from=%q names no earlier stage", in.line, from)
			}
			dest := f[len(f)-1]
			for _, src := range f[:len(f)-1] {
				base := src[strings.LastIndex(src, "/")+1:]
				if strings.HasSuffix(dest, "/") {
					copied[dest+base] = true
				} else {
					copied[dest] = true
				}
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("Dockerfile: USER %q, want a numeric non-root user (Kubernetes' runAsNonRoot checks the number)", user)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) == 0 {
		t.Fatalf("Dockerfile: ENTRYPOINT %s is not the exec (JSON) form: %v", entrypoint, err)
	}
	for _, bin := range []string{ep[0], "/usr/bin/kafka-cluster-mirrors"} {
		if !copied[bin] {
			t.Errorf("Dockerfile: %s is not copied into the image (copied: %v)", bin, copied)
		}
	}
}
