package main

import "os"

func main() {
	os.Exit(mainCode(os.Args[1:]))
}
