// Package deploy holds what an operator needs to run sidemirror: the
// systemd unit in deploy/systemd, commented example configurations in
// deploy/examples and the local demo. It contains no Go code besides this
// comment.
package deploy
