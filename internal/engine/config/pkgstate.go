package config

import (
	"slices"
	"strings"
)

// PackageStateDirs are the package manager's state that describes what it
// installed in /usr: dpkg's database (status, file lists, maintainer
// scripts) and apt's (extended_states: the automatic marks; lists: the
// package index `apt-get install` resolves names in). A profile that
// persists /usr persists them with it (packageState), or after a restart
// /usr holds a tool that `dpkg -s` calls not installed and `apt-get
// install` cannot find (issue 40 item 2).
//
// Only dpkg/apt: the configuration cannot see the image, and a path an
// image lacks becomes an empty overlay (harmless, two mounts beside the
// others), while one that passes through a symlink in the image is
// refused at start. apk's /lib/apk/db is such a path on Debian (/lib →
// usr/lib), and so is /var/lib/rpm on Fedora (→ /usr/lib/sysimage/rpm), so
// neither can be added blindly: rpm's current database is under /usr
// already; apk's and an older rpm's are listed by hand
// (docs/STATEANCHOR.md, "Default dirs").
var PackageStateDirs = []string{"/var/lib/dpkg", "/var/lib/apt"}

// packageState adds PackageStateDirs to a profile that persists /usr
// without them, after its volumes are known; persist_package_db = false
// turns it off. A dir is not added where an entry or a volume already
// covers it (/var, /var/lib; a volume keeps it on the host) and, with a
// warning, where one lies inside it
// or it would share an overlay name: two overlays cannot nest.
func (v *validator) packageState(p *Profile, key keyPath, fp *fileProfile) {
	if fp.PersistPackageDB != nil && !*fp.PersistPackageDB {
		p.PackageDBOff = true
		return
	}
	if !slices.Contains(p.PersistentDirs, "/usr") {
		return
	}
	pdKey := key.child("persistent_dirs")
	for _, d := range PackageStateDirs {
		if slices.ContainsFunc(p.PersistentDirs, func(e string) bool { return within(d, e) }) ||
			slices.ContainsFunc(p.Volumes, func(vol Volume) bool { return within(d, vol.Container) }) {
			continue // listed, under a listed dir (/var), or a volume's
		}
		if clash := packageStateClash(p, d); clash != "" {
			v.warn(pdKey, "/usr persists without "+d+", the package database that describes it: "+clash+
				"; list "+d+" in persistent_dirs instead, or set persist_package_db = false")
			continue
		}
		p.PersistentDirs = append(p.PersistentDirs, d)
		p.PackageDirsAdded = append(p.PackageDirsAdded, d)
	}
}

// packageStateClash says why d cannot be added to p's persistent dirs: an
// entry inside it or sharing its overlay name, or a volume inside it. ""
// when nothing stands in the way.
func packageStateClash(p *Profile, d string) string {
	for _, e := range p.PersistentDirs {
		if err := checkPersistentPair(e, d); err != nil {
			return err.Error()
		}
	}
	for _, vol := range p.Volumes {
		if within(vol.Container, d) {
			return "volume " + quoteValue(vol.Container) + " is mounted there"
		}
	}
	return ""
}

// PackageStateNote is the one line that says what lazaret does with the
// package database of p's /usr, or "" when there is nothing to say (the
// database is listed, or /usr is not persistent): `lazaret config check`,
// `lazaret state` and a sandbox's start print it.
func (p *Profile) PackageStateNote() string {
	switch {
	case len(p.PackageDirsAdded) > 0:
		return "persisting " + strings.Join(p.PackageDirsAdded, " and ") +
			" with /usr (the package database that describes it; persist_package_db = false keeps the image's)"
	case p.PackageDBOff && slices.Contains(p.PersistentDirs, "/usr") &&
		!slices.ContainsFunc(p.PersistentDirs, func(e string) bool { return within(PackageStateDirs[0], e) }):
		return "/usr persists without its package database (persist_package_db = false): " +
			"dpkg and apt forget what the sandbox installed at each restart"
	}
	return ""
}
