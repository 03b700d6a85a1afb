// Package doccheck holds no code: its tests check the project's documents
// (the README, the pages of docs/, the root package's map of its files)
// against the code: every Go block compiles and handles its errors, every
// link resolves, every recipe is the example CI runs. They build packages
// with the go command, which takes long, so they run as a package of their
// own, beside the others, rather than inside the root package's tests.
package doccheck
