// Package statuspage holds the end-to-end test of the sidecar's status page
// (http.listener, "/"): it runs the demo (e2e/cmd/demo, which starts its own
// clusters and sidecars), renders the page of its first sidecar in headless
// Chromium (Debian's chromium package) while the backlog drains, and checks
// the screenshot and the page Chromium rendered. With
// SIDEMIRROR_UPDATE_SCREENSHOT=1 it writes the screenshot to
// docs/status-page.png.
package statuspage
