// Command casleader runs and inspects casleader elections from the shell: create the
// election table (migrate), show who leads (status), run a command only while this
// instance leads (run), ask the leader to step down or hand over (resign, handover),
// and watch a local failover (demo).
//
// Run `casleader help` for the commands, the DSN forms and the exit codes; each
// command has its own `--help`.
package main

import "os"

func main() {
	os.Exit(mainCode(os.Args[1:]))
}
