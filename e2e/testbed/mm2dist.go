package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

const mm2PomTemplate = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sidemirror.testbed</groupId>
  <artifactId>mirrormaker2-distribution</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-mirror</artifactId><version>%[1]s</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>connect-runtime</artifactId><version>%[1]s</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>%[2]s</version></dependency>
  </dependencies>
</project>
`

// ResolveMirrorMaker returns the jars of Kafka's MirrorMaker 2
// (org.apache.kafka:connect-mirror and connect-runtime of the given version,
// with their runtime dependencies), resolved with Maven from Maven Central
// into <cache>/mirrormaker2/<version> on first use, the same way Resolve
// resolves the brokers' jars. The directory holds everything the dedicated
// MirrorMaker JVM needs (kafka-clients included), apart from the brokers'.
func ResolveMirrorMaker(ctx context.Context, version string, progress func(string)) (Distribution, error) {
	cache, err := CacheDir()
	if err != nil {
		return Distribution{}, err
	}
	root := filepath.Join(cache, "mirrormaker2", version)
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
		return dist, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return Distribution{}, errors.New("testbed: mvn not found on PATH: install Maven (apt-get install maven) to resolve MirrorMaker 2's jars")
	}
	if progress != nil {
		progress(fmt.Sprintf("resolving MirrorMaker 2 (connect-mirror %s) with Maven into %s", version, root))
	}
	pom := filepath.Join(root, "pom.xml")
	if err := os.WriteFile(pom, fmt.Appendf(nil, mm2PomTemplate, version, log4jSLF4JVersion), 0o644); err != nil {
		return Distribution{}, fmt.Errorf("testbed: %w", err)
	}
	staging := filepath.Join(root, "libs.partial")
	_ = os.RemoveAll(staging)
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", pom,
		dependencyPlugin+":copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+staging)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Distribution{}, fmt.Errorf("testbed: maven could not resolve org.apache.kafka:connect-mirror:%s: %w\n%s", version, err, tail(string(out), 40))
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
