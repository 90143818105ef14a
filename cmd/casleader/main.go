package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A closed stdout or stderr (casleader ... | head) must not kill casleader at its
	// next log line: while it leads, it is the one that stops the child. With SIGPIPE
	// caught, such a write fails with EPIPE and casleader keeps its duties. A caught
	// signal is reset to its default in the processes casleader starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(mainCode(os.Args[1:]))
}
