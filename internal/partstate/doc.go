// Package partstate is the one partition state machine of sidemirror
// (DESIGN D12, D16): the state codes that fetcher, coordinator, statestore
// and describe share, the events that move a partition, and the table
// (state x event -> next state, action) every one of them follows. It
// imports nothing but the standard library, so that the data plane and the
// state store can use it.
//
// docs/operations.md's partition state section is generated from the
// table (Markdown); a test fails when the two differ: run
// `go test ./internal/partstate -run TestOperationsGuide -update` after
// changing the table.
//
// Files:
//
//	state.go  State, the codes and their names, Parse
//	table.go  Event, Action, Transition, Next, the table
//	doc.go    this overview and Markdown, the operations guide's section
package partstate

import (
	"fmt"
	"strings"
)

// operation names an operator event as the CLI spells it.
var operation = map[Event]string{
	Start: "`--start`", Restart: "`--recover`, or `--start` of an active topic (restart)", Pause: "`--pause`", Resume: "`--resume`", Stop: "`--stop`",
}

// Markdown renders the operations guide's section on partition states:
// the states, the transitions with their actions, and the operations each
// state refuses with their errors.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| code | state | meaning | describe shows |\n|---|---|---|---|\n")
	for _, s := range States {
		in := stateInfos[s]
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", s, s, in.meaning, in.describe)
	}
	b.WriteString("\nTransitions (every other event leaves the state as it is):\n\n")
	b.WriteString("| from | event | raised by | to | action |\n|---|---|---|---|---|\n")
	for _, s := range States {
		for _, e := range Events {
			t := Next(s, e)
			if !t.Allowed() || (t.To == s && t.Action == None) {
				continue
			}
			action := t.Action.String()
			if action == "" {
				action = "-"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | `%s` | %s |\n", s, e, e.Source(), t.To, action)
		}
	}
	b.WriteString("\nOperations a state refuses, with error `INVALID_REQUEST` (per topic: the other topics of the request go on):\n\n")
	b.WriteString("| state | operation | error |\n|---|---|---|\n")
	for _, s := range States {
		for _, e := range Events {
			if t := Next(s, e); !t.Allowed() {
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s, operation[e], t.Refusal("<topic>", "<mirror>"))
			}
		}
	}
	return b.String()
}
