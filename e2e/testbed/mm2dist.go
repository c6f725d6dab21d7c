package testbed

import (
	"context"
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
	return resolveJars(ctx, jarSet{
		dir: "mirrormaker2", pom: mm2PomTemplate, artifact: "org.apache.kafka:connect-mirror",
		what: "MirrorMaker 2's jars", start: "resolving MirrorMaker 2 (connect-mirror " + version + ")",
	}, version, progress)
}
