#!/usr/bin/env bash
# Succeeds once no live java process is left (zombies, already dead and
# waiting for init to reap them, do not count); fails after 30 seconds.
set -u
command -v ps >/dev/null 2>&1 || { echo "ps not found (Debian package procps): cannot look for java processes" >&2; exit 1; }
for _ in $(seq 150); do
	live=$(ps -C java -o pid=,stat=,args= 2>/dev/null | awk '$2 !~ /^Z/')
	if [ -z "$live" ]; then
		echo "no java process left"
		exit 0
	fi
	sleep 0.2
done
echo "java processes left behind:" >&2
echo "$live" >&2
exit 1
