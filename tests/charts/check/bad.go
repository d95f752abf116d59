package main

import (
	"fmt"
	"strings"
)

// checkBadSet: the value set must fail rendering with a clear message. With
// schema validation the message is the schema's (want); the chart's own
// template checks (wantTemplate) must hold as well, with the schema skipped.
func checkBadSet(c *Checker, e *Env, b badSet) {
	expectFailure := func(args []string, want string) error {
		res := e.Render(args...)
		if res.err == nil {
			return fmt.Errorf("rendered without error; want an error containing %q", want)
		}
		if !strings.HasPrefix(res.stderr, "Error: ") {
			return fmt.Errorf("stderr %q does not start with \"Error: \"", firstLine(res.stderr))
		}
		if !strings.Contains(res.stderr, want) {
			return fmt.Errorf("error %q does not contain %q", strings.TrimSpace(res.stderr), want)
		}
		if res.stdout != "" {
			return fmt.Errorf("printed manifests although rendering failed")
		}
		return nil
	}
	first := b.want
	if first == "" {
		first = b.wantTemplate
	}
	c.Check("rejects "+b.name, expectFailure(b.args, first))
	if b.want != "" && b.wantTemplate != "" {
		args := append(append([]string{}, b.args...), "--skip-schema-validation")
		c.Check("rejects "+b.name+" without the schema (template check)", expectFailure(args, b.wantTemplate))
	}
}
