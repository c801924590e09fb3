//go:build race

package main

func init() { raceFlag = []string{"-race"} }
