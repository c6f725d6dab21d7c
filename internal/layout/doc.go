// Package layout holds the checks of the repository's layout that no one
// package can make about itself: that every package's file map names
// every file it has (layout_test.go). It has no code: doc.go is this
// comment.
package layout
