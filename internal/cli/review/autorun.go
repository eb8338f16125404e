package review

import (
	"path"
	"strings"
)

// Files the user's tools run (or that decide what they run) without being
// asked to, once they are in the working tree: on `cd` (direnv, mise), on
// opening the folder (editor tasks and settings, dev containers, build
// imports), on the next commit (hook managers, attributes selecting
// filters), on install or build (package scripts, build scripts), on push
// (CI). Matched on any directory level, since nested projects are opened
// too.

// autorunNames are file names, at any depth.
var autorunNames = map[string]string{
	".envrc":                  "direnv runs it on cd",
	".env":                    "loaded into the environment by direnv, compose and many tools",
	".mise.toml":              "mise runs its hooks and tasks on cd",
	"mise.toml":               "mise runs its hooks and tasks on cd",
	".tool-versions":          "asdf/mise install and run the tools it names",
	"Makefile":                "make runs it",
	"makefile":                "make runs it",
	"GNUmakefile":             "make runs it",
	"package.json":            "npm/yarn/pnpm run its scripts (install, prepare, test)",
	".npmrc":                  "npm settings (scripts, registry, node options)",
	".yarnrc":                 "yarn settings",
	".yarnrc.yml":             "yarn settings and plugins",
	".pnpmfile.cjs":           "pnpm runs it on install",
	".gitattributes":          "selects filter, diff and merge drivers git runs",
	".gitmodules":             "submodule URLs and update commands",
	".pre-commit-config.yaml": "pre-commit runs the hooks it names",
	"lefthook.yml":            "lefthook runs the hooks it names",
	".lefthook.yml":           "lefthook runs the hooks it names",
	"build.rs":                "cargo runs it on build",
	"pyproject.toml":          "build backends and tools run what it names",
	"setup.py":                "pip runs it on install",
	"setup.cfg":               "setuptools configuration",
	"conftest.py":             "pytest imports it",
	"sitecustomize.py":        "python imports it at start-up",
	"noxfile.py":              "nox runs it",
	"tox.ini":                 "tox runs its commands",
	"CMakeLists.txt":          "IDEs run CMake configure on opening the folder",
	"CMakePresets.json":       "IDEs run CMake configure on opening the folder",
	"build.gradle":            "IDEs run the Gradle build on import",
	"build.gradle.kts":        "IDEs run the Gradle build on import",
	"settings.gradle":         "IDEs run the Gradle build on import",
	"settings.gradle.kts":     "IDEs run the Gradle build on import",
	"gradlew":                 "the Gradle wrapper IDEs run",
	"Rakefile":                "rake runs it",
	"Gemfile":                 "bundler evaluates it",
	"Vagrantfile":             "vagrant evaluates it",
	"flake.nix":               "nix/direnv evaluate it",
	"shell.nix":               "nix/direnv evaluate it",
	"Jenkinsfile":             "CI runs it",
	".gitlab-ci.yml":          "CI runs it",
	".travis.yml":             "CI runs it",
	"azure-pipelines.yml":     "CI runs it",
	".drone.yml":              "CI runs it",
	"bitbucket-pipelines.yml": "CI runs it",
	".devcontainer.json":      "the dev container the editor builds and runs",
}

// autorunDirs are directories whose every file counts, at any depth.
var autorunDirs = map[string]string{
	".vscode":          "the editor runs tasks, launch configurations and settings from it",
	".idea":            "JetBrains IDEs run configurations from it",
	".devcontainer":    "the dev container the editor builds and runs",
	".husky":           "git hooks (husky)",
	".githooks":        "git hooks (core.hooksPath)",
	".git-hooks":       "git hooks (core.hooksPath)",
	"githooks":         "git hooks (core.hooksPath)",
	".circleci":        "CI runs it",
	".buildkite":       "CI runs it",
	".cargo":           "cargo configuration (runners, build scripts, aliases)",
	".mvn":             "the Maven wrapper and its options",
	".gradle":          "Gradle init scripts and properties",
	".direnv":          "direnv state and scripts",
	".bundle":          "bundler configuration",
	".yarn":            "yarn plugins and releases it runs",
	".config":          "tool configuration read on start (mise, etc.)",
	".github":          "CI workflows and actions",
	".gitea":           "CI workflows",
	".forgejo":         "CI workflows",
	".pre-commit":      "pre-commit hooks",
	".terraform.d":     "terraform plugins",
	".ipython":         "ipython start-up scripts",
	".jupyter":         "jupyter configuration",
	".vim":             "editor configuration",
	".nvim":            "editor configuration",
	".emacs.d":         "editor configuration",
	".zed":             "editor tasks and settings",
	".fleet":           "editor run configurations",
	".sublime":         "editor configuration",
	".theia":           "editor tasks and settings",
	".gitpod":          "workspace tasks",
	".devfile":         "workspace tasks",
	".dagger":          "CI runs it",
	".woodpecker":      "CI runs it",
	".semaphore":       "CI runs it",
	".teamcity":        "CI runs it",
	".ci":              "CI runs it",
	".azure-pipelines": "CI runs it",
}

// autorunSuffixes are name endings, at any depth.
var autorunSuffixes = map[string]string{
	".mk":             "make includes it",
	".cmake":          "CMake runs it",
	".code-workspace": "the editor's workspace tasks and settings",
	".pth":            "python runs its import lines at start-up",
}

// autorun says why the host runs the file at p unasked, or "".
func autorun(p string) string {
	base := path.Base(p)
	if why, ok := autorunNames[base]; ok {
		return why
	}
	for suffix, why := range autorunSuffixes {
		if strings.HasSuffix(base, suffix) {
			return why
		}
	}
	dirs := strings.Split(path.Dir(p), "/")
	for _, d := range dirs {
		if why, ok := autorunDirs[d]; ok {
			return why
		}
	}
	if strings.HasPrefix(base, ".devcontainer") || strings.HasPrefix(base, "docker-compose") || strings.HasPrefix(base, "compose.") {
		return "the editor or compose builds and runs it"
	}
	return ""
}
