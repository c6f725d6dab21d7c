package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultKafkaVersion is the Apache Kafka release the test bed runs unless
// KAFKA_VERSION names another.
const DefaultKafkaVersion = "4.1.1"

// log4jSLF4JVersion is the log4j binding that routes the broker's SLF4J
// logging to log4j2, as Kafka's own distribution does.
const log4jSLF4JVersion = "2.24.3"

// dependencyPlugin is the Maven plugin that copies Kafka's jars, its version
// pinned so that every machine resolves the same way.
const dependencyPlugin = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

// KafkaVersion returns the Kafka version to run: KAFKA_VERSION or the default.
func KafkaVersion() string {
	if v := strings.TrimSpace(os.Getenv("KAFKA_VERSION")); v != "" {
		return v
	}
	return DefaultKafkaVersion
}

// CacheDir is where resolved Kafka distributions are kept:
// $SIDEMIRROR_CACHE_DIR, else the user cache directory (~/.cache/sidemirror).
func CacheDir() (string, error) {
	if d := os.Getenv("SIDEMIRROR_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testbed: no cache directory: %w (set SIDEMIRROR_CACHE_DIR)", err)
	}
	return filepath.Join(d, "sidemirror"), nil
}

// Distribution is a resolved set of Kafka jars.
type Distribution struct {
	Version string
	LibDir  string // directory holding every jar
}

// Classpath returns the JVM class path of the distribution.
func (d Distribution) Classpath() string { return filepath.Join(d.LibDir, "*") }

const pomTemplate = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sidemirror.testbed</groupId>
  <artifactId>kafka-distribution</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>%[1]s</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>%[1]s</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>%[2]s</version></dependency>
  </dependencies>
</project>
`

// Resolve returns the jars of the given Kafka version, resolving them with
// Maven from Maven Central into the cache on first use. Concurrent callers
// (test packages run in parallel) wait for each other through a file lock.
// progress, if not nil, receives a line when a download starts.
func Resolve(ctx context.Context, version string, progress func(string)) (Distribution, error) {
	return resolveJars(ctx, jarSet{
		dir: "kafka", pom: pomTemplate, artifact: "org.apache.kafka:kafka_2.13",
		what: "Kafka's jars", start: "resolving Apache Kafka " + version,
	}, version, progress)
}

// jarSet is a set of jars that resolveJars resolves with Maven: a pom whose
// dependencies they are (a template of the version and log4j's), and the
// words of its messages.
type jarSet struct {
	dir      string // under the cache: <cache>/<dir>/<version>
	pom      string
	artifact string // groupId:artifactId named when Maven fails
	what     string // "Kafka's jars", when mvn is missing
	start    string // the progress line's start
}

// resolveJars resolves set's jars of version into <cache>/<set.dir>/<version>
// on first use: Maven copies the pom's runtime dependencies into a staging
// directory that replaces libs/ whole, and a "complete" file marks the
// result. A file lock serializes concurrent callers.
func resolveJars(ctx context.Context, set jarSet, version string, progress func(string)) (Distribution, error) {
	cache, err := CacheDir()
	if err != nil {
		return Distribution{}, err
	}
	root := filepath.Join(cache, set.dir, version)
	dist := Distribution{Version: version, LibDir: filepath.Join(root, "libs")}
	done := filepath.Join(root, "complete")
	if _, err := os.Stat(done); err == nil {
		return dist, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Distribution{}, fmt.Errorf("testbed: create %s: %w", root, err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Distribution{}, fmt.Errorf("testbed: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Distribution{}, fmt.Errorf("testbed: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // released on close anyway
	if _, err := os.Stat(done); err == nil {
		return dist, nil // another process resolved it while we waited
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return Distribution{}, fmt.Errorf("testbed: mvn not found on PATH: install Maven (apt-get install maven) to resolve %s", set.what)
	}
	if progress != nil {
		progress(fmt.Sprintf("%s with Maven into %s", set.start, root))
	}
	pom := filepath.Join(root, "pom.xml")
	if err := os.WriteFile(pom, fmt.Appendf(nil, set.pom, version, log4jSLF4JVersion), 0o644); err != nil {
		return Distribution{}, fmt.Errorf("testbed: %w", err)
	}
	staging := filepath.Join(root, "libs.partial")
	_ = os.RemoveAll(staging)
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", pom,
		dependencyPlugin+":copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+staging)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Distribution{}, fmt.Errorf("testbed: maven could not resolve %s:%s: %w\n%s", set.artifact, version, err, tail(string(out), 40))
	}
	_ = os.RemoveAll(dist.LibDir)
	if err := os.Rename(staging, dist.LibDir); err != nil {
		return Distribution{}, fmt.Errorf("testbed: %w", err)
	}
	if err := os.WriteFile(done, []byte(version+"\n"), 0o644); err != nil {
		return Distribution{}, fmt.Errorf("testbed: %w", err)
	}
	return dist, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
