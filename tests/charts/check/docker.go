package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The image's build must be CI's build: the same install script and the same
// CMake command. No Docker engine runs here, so the Dockerfile is checked as
// text.

// issueBuildCommand is the build the issue prescribes when there is no CI
// script to follow.
const issueBuildCommand = "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build --target fitledger-server fitledger-shim fitledgerctl"

var imageTargets = []string{"fitledger-server", "fitledger-shim", "fitledgerctl", "fitledger-sim"}

// runtimePackages is exactly what the runtime image installs.
var runtimePackages = []string{
	"ca-certificates", "libabsl20220623", "libcpp-httplib0.11", "libcurl4",
	"libgrpc++1.51", "libprotobuf32", "libsimdjson14", "libyaml-cpp0.7",
}

var spaces = regexp.MustCompile(`\s+`)

type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, USER, ...
	args string // whitespace collapsed, continuation lines joined
}

type stage struct {
	from, name string
	ins        []instruction
}

// parseDockerfile splits a Dockerfile into stages of instructions; comments
// and parser directives are dropped, continuation lines joined.
func parseDockerfile(text string) []stage {
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			logical = append(logical, s)
		}
		cur.Reset()
	}
	var stages []stage
	for _, l := range logical {
		l = spaces.ReplaceAllString(l, " ")
		parts := strings.SplitN(l, " ", 2)
		in := instruction{cmd: strings.ToUpper(parts[0])}
		if len(parts) == 2 {
			in.args = parts[1]
		}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{}
			for i := 0; i < len(f); i++ {
				if strings.HasPrefix(f[i], "--") {
					continue
				}
				if st.from == "" {
					st.from = f[i]
				} else if strings.EqualFold(f[i], "AS") && i+1 < len(f) {
					st.name = f[i+1]
				}
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) > 0 {
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	return stages
}

func runs(st stage) string {
	var out []string
	for _, in := range st.ins {
		if in.cmd == "RUN" {
			out = append(out, in.args)
		}
	}
	return strings.Join(out, " ; ")
}

func checkDockerfile(c *Checker, e *Env) {
	text, err := readFile(e, "Dockerfile")
	if err != nil {
		c.Check("Dockerfile exists", err)
		return
	}
	stages := parseDockerfile(text)
	var build, final stage
	err = func() error {
		if len(stages) < 2 {
			return fmt.Errorf("%d stages, want a build stage and a runtime stage", len(stages))
		}
		build, final = stages[0], stages[len(stages)-1]
		if strings.Split(build.from, "@")[0] != "debian:12" {
			return fmt.Errorf("build stage FROM %s, want debian:12", build.from)
		}
		if strings.Split(final.from, "@")[0] != "debian:12-slim" {
			return fmt.Errorf("runtime stage FROM %s, want debian:12-slim", final.from)
		}
		if build.name == "" {
			return fmt.Errorf("the build stage is unnamed")
		}
		return nil
	}()
	c.Check("Dockerfile: multi-stage, builds on debian:12, ships on debian:12-slim", err)
	if err != nil {
		return
	}

	buildRuns := runs(build)
	err = nil
	if !strings.Contains(buildRuns, "scripts/install-deps") {
		err = fmt.Errorf("the build stage does not run scripts/install-deps")
	}
	c.Check("Dockerfile: build stage runs scripts/install-deps", err)

	configure := cmakeConfigure(buildRuns)
	ci, ciErr := readFile(e, "scripts/test")
	if ciErr == nil {
		c.Check("Dockerfile: build stage configures CMake as CI (scripts/test) does", sameConfigureAsCI(configure, ci))
	} else {
		err = nil
		if !strings.Contains(buildRuns, issueBuildCommand) {
			err = fmt.Errorf("no scripts/test; the build stage does not run %q", issueBuildCommand)
		}
		c.Check("Dockerfile: build stage runs the issue's build command (no scripts/test)", err)
	}

	err = func() error {
		for _, cmd := range strings.Split(buildRuns, "&&") {
			f := strings.Fields(cmd)
			if len(f) < 3 || f[0] != "cmake" || f[1] != "--build" || f[2] != cmakeBuildDir(configure) {
				continue
			}
			built := map[string]bool{}
			for _, x := range f {
				built[x] = true
			}
			for _, t := range imageTargets {
				if !built[t] {
					return fmt.Errorf("%q does not build %s", strings.TrimSpace(cmd), t)
				}
			}
			return nil
		}
		return fmt.Errorf("no `cmake --build %s --target ...` in the build stage", cmakeBuildDir(configure))
	}()
	c.Check("Dockerfile: build stage builds the four executables in the configured tree", err)

	err = func() error {
		finalRuns := runs(final)
		if !strings.Contains(finalRuns, "apt-get install") || !strings.Contains(finalRuns, "--no-install-recommends") {
			return fmt.Errorf("runtime stage does not apt-get install --no-install-recommends")
		}
		if !strings.Contains(finalRuns, "rm -rf /var/lib/apt/lists") {
			return fmt.Errorf("runtime stage keeps the apt lists")
		}
		i := strings.Index(finalRuns, "--no-install-recommends")
		rest := finalRuns[i+len("--no-install-recommends"):]
		if j := strings.IndexAny(rest, "&;"); j >= 0 {
			rest = rest[:j]
		}
		got := strings.Fields(rest)
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(runtimePackages, " ") {
			return fmt.Errorf("runtime packages %v, want exactly %v", got, runtimePackages)
		}
		return nil
	}()
	c.Check("Dockerfile: runtime stage installs only the runtime shared libraries", err)

	err = func() error {
		copied := map[string]bool{}
		for _, in := range final.ins {
			if in.cmd == "COPY" && strings.Contains(in.args, "--from="+build.name) {
				for _, f := range strings.Fields(in.args) {
					copied[filepath.Base(f)] = true
				}
				if !strings.HasSuffix(in.args, "/usr/local/bin/") {
					return fmt.Errorf("COPY %s: binaries go to /usr/local/bin/", in.args)
				}
			}
		}
		for _, b := range []string{"fitledger-server", "fitledger-shim", "fitledgerctl", "fitledger-sim"} {
			if !copied[b] {
				return fmt.Errorf("%s is not copied from the build stage", b)
			}
		}
		return nil
	}()
	c.Check("Dockerfile: ships fitledger-server, fitledger-shim, fitledgerctl, fitledger-sim in /usr/local/bin", err)

	err = func() error {
		user := ""
		for _, in := range final.ins {
			if in.cmd == "USER" {
				user = in.args
			}
		}
		if user != "65532:65532" && user != "65532" {
			return fmt.Errorf("last USER %q, want the numeric non-root 65532 (runAsNonRoot can only verify a numeric user)", user)
		}
		return nil
	}()
	c.Check("Dockerfile: runs as the numeric non-root user 65532", err)

	ignore, err := readFile(e, ".dockerignore")
	if err == nil {
		lines := map[string]bool{}
		for _, l := range strings.Split(ignore, "\n") {
			lines[strings.TrimSpace(l)] = true
		}
		for _, want := range []string{".git", "build"} {
			if !lines[want] && !lines[want+"/"] {
				err = fmt.Errorf(".dockerignore does not exclude %s", want)
			}
		}
		for _, keep := range []string{"scripts", "scripts/", "server", "tests", "proto", "CMakeLists.txt", "*"} {
			if lines[keep] {
				err = fmt.Errorf(".dockerignore excludes %s, which the build needs", keep)
			}
		}
	}
	c.Check(".dockerignore keeps the build context to the sources", err)
}

// cmakeConfigure returns the first "cmake -S ..." command of a shell text.
func cmakeConfigure(runs string) []string {
	for _, cmd := range regexp.MustCompile(`&&|;|\|\|`).Split(runs, -1) {
		f := strings.Fields(cmd)
		if len(f) > 1 && f[0] == "cmake" && f[1] == "-S" {
			return f
		}
	}
	return nil
}

func cmakeBuildDir(configure []string) string {
	for i, a := range configure {
		if a == "-B" && i+1 < len(configure) {
			return configure[i+1]
		}
	}
	return ""
}

// sameConfigureAsCI: CI must run the same install script and configure with
// the same source dir, generator and -D options as the image (CI runs several
// configurations; one of them must be the image's). scripts/test may pass the
// build dir and the options through a shell function, so the check matches
// the options, not one literal line.
func sameConfigureAsCI(configure []string, ci string) error {
	if configure == nil {
		return fmt.Errorf("the build stage runs no `cmake -S ...` configure")
	}
	ci = strings.ReplaceAll(ci, "\\\n", " ")
	flat := spaces.ReplaceAllString(ci, " ")
	if !strings.Contains(flat, "scripts/install-deps") {
		return fmt.Errorf("scripts/test does not run scripts/install-deps")
	}
	if !strings.Contains(flat, "cmake -S . -B") {
		return fmt.Errorf("scripts/test does not configure with `cmake -S . -B`")
	}
	var defs []string
	for i, a := range configure {
		switch {
		case a == "-G" && i+1 < len(configure):
			if !strings.Contains(flat, "-G "+configure[i+1]) {
				return fmt.Errorf("scripts/test does not use the generator %s", configure[i+1])
			}
		case strings.HasPrefix(a, "-D"):
			defs = append(defs, a)
		}
	}
	// One CI configuration line must carry exactly the image's -D options
	// (the image builds with the default compiler, like that line).
	sort.Strings(defs)
	for _, line := range strings.Split(ci, "\n") {
		var lineDefs []string
		for _, f := range strings.Fields(line) {
			// FITLEDGER_UPSTREAM_BIN only tells the tests where the upstream programs are
			// (tests/upstream), and FITLEDGER_WERROR only refuses warnings: neither changes
			// what the image's build compiles.
			if strings.HasPrefix(f, "-D") && !strings.HasPrefix(f, "-DFITLEDGER_UPSTREAM_BIN=") &&
				!strings.HasPrefix(f, "-DFITLEDGER_WERROR=") {
				lineDefs = append(lineDefs, strings.Trim(f, `"'`))
			}
		}
		sort.Strings(lineDefs)
		if len(lineDefs) > 0 && strings.Join(lineDefs, " ") == strings.Join(defs, " ") {
			return nil
		}
	}
	return fmt.Errorf("no configuration in scripts/test uses %v and nothing else", defs)
}
