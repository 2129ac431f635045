package main

func pointerTo[T any](v T) *T { return &v }
