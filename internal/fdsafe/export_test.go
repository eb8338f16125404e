package fdsafe

// MarkByWalk exposes the fallback for tests.
var MarkByWalk = markByWalk
