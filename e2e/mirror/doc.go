// Package mirror holds the end-to-end tests of mirroring itself: three
// sidecars beside a three-node destination cluster copy topics from a
// source cluster, and the results are checked with kcat and raw fetches.
package mirror
