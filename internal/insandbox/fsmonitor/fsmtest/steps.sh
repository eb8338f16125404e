# Conformance steps for a git fsmonitor: after each change to the work
# tree, `git status --porcelain` as configured (with the fsmonitor) must
# equal a full scan (core.fsmonitor=false and core.untrackedCache=false,
# so nothing the monitored run cached is trusted; GIT_OPTIONAL_LOCKS=0 so
# the full scan never rewrites the index and its fsmonitor token). Run with
# bash in the top level of a work tree made by Seed; $FSM_GIT holds extra
# git options for the monitored status (a lying hook for the control).
# Prints "MISMATCH <step>" with both outputs for every difference,
# "INCREMENTAL <step>" when git applied a list of changed paths from the
# hook (not "/"), and "DONE" at the end.
set -u
export GIT_AUTHOR_NAME=Agent GIT_AUTHOR_EMAIL=agent@example.com
export GIT_COMMITTER_NAME=Agent GIT_COMMITTER_EMAIL=agent@example.com
trace=$(mktemp)
check() {
	local mon full
	mon=$(GIT_TRACE_FSMONITOR="$trace" git ${FSM_GIT:-} status --porcelain 2>&1)
	full=$(GIT_OPTIONAL_LOCKS=0 git -c core.fsmonitor=false -c core.untrackedCache=false status --porcelain 2>&1)
	if [ "$mon" != "$full" ]; then
		printf 'MISMATCH %s\n--- fsmonitor:\n%s\n--- full scan:\n%s\n---\n' "$1" "$mon" "$full"
	fi
	if grep -q "fsmonitor_refresh_callback '[^/]" "$trace"; then
		echo "INCREMENTAL $1"
	fi
	: > "$trace"
}
check start
check again
echo more >> src/d01/f01.txt;              check edit
printf 'X' | dd of=src/d01/f02.txt bs=1 count=1 conv=notrunc 2>/dev/null; check same-size-edit
: > src/d01/f03.txt;                       check truncate
echo new > src/d01/new.txt;                check create-untracked
echo top > top.txt;                        check create-top
rm src/d02/f01.txt;                        check delete
mv src/d02/f02.txt src/d02/f02.moved;      check rename-in-dir
mv src/d02/f03.txt src/d03/;               check rename-across-dirs
chmod +x src/d03/f01.txt;                  check chmod
touch src/d03/f02.txt;                     check touch
git add -A && git commit -q -m step1;      check commit
rm -rf src/d04;                            check rmdir
mkdir -p newdir/sub; echo x > newdir/sub/x; check mkdir
echo y > newdir/sub/y;                     check file-in-new-dir
echo z >> newdir/sub/x;                    check edit-in-new-dir
mv src/d05 src/d05b;                       check rename-dir
echo w >> src/d05b/f01.txt;                check edit-in-renamed-dir
mkdir src/d05; echo v > src/d05/f01.txt;   check recreate-old-dir-name
printf 'ignored*\n' > .gitignore; echo i > ignored.txt; check gitignore
rm .gitignore;                             check gitignore-removed
ln -s src/d01/f01.txt link;                check symlink
ln -sfn src/d01/f04.txt link;              check symlink-retarget
git add -A && git commit -q -m step2;      check commit2
rm src/d06/f01.txt; mkdir src/d06/f01.txt; echo q > src/d06/f01.txt/q; check file-to-dir
git add -A && git commit -q -m step3;      check commit3
git checkout -q -b other;                  check branch
echo other >> src/d07/f01.txt; git commit -q -am other; check commit-on-branch
git checkout -q -;                         check checkout-back
echo stash >> src/d07/f02.txt; git stash -q; check stash
git stash pop -q;                          check stash-pop
for i in 01 02 03 04 05 06 07 08 09; do echo many >> src/d08/f$i.txt; done; check many-edits
git reset -q --hard;                       check reset-hard
git clean -q -fd;                          check clean
echo after >> src/d09/f01.txt;             check edit-after-clean
sed -i 's/dir/DIR/' src/d10/f02.txt;       check sed-in-place
ln src/d10/f03.txt hl0 && echo race >> hl0 && rm hl0; check hardlink-gone
ln src/d09/f02.txt hardlink;               check hardlink
echo via-link >> hardlink;                 check edit-through-hardlink
echo DONE
