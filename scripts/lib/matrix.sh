# SPDX-License-Identifier: Apache-2.0
# The cross-vendor test matrix: one row per backend, whether it ran (or why not) and its counts.
#
#   source scripts/lib/matrix.sh
#   gpuplug_print_matrix build/dev        # prints the table; returns 1 when a backend failed
#
# Every plugin the build's `gpuplug` finds is listed (`gpuplug check --list-plugins`). Each
# available one is run in its own process with `gpuplug check --backend <name>:0!`, so a crash in
# one vendor cannot hide the others; the counts are the last line of its output
# ("N passed, N failed, N skipped"). Unavailable or broken plugins get a row saying why.

# gpuplug_print_matrix <build-dir>
gpuplug_print_matrix() {
  local build=${1:?gpuplug_print_matrix needs a build directory}
  local tool="$build/bin/gpuplug"
  if [ ! -x "$tool" ]; then
    echo "gpuplug matrix: $tool is not built" >&2
    return 1
  fi
  local listing
  if ! listing=$("$tool" check --list-plugins 2>&1); then
    echo "gpuplug matrix: '$tool check --list-plugins' failed:" >&2
    printf '%s\n' "$listing" >&2
    return 1
  fi

  local -a names=() states=() passed=() failed=() skipped=() times=() notes=()
  local any_failed=0 name state reason devices message
  while IFS=$'\t' read -r name state reason devices message; do
    [ -n "$name" ] || continue
    if [ "$state" != available ]; then
      names+=("$name"); states+=("not run"); passed+=(-); failed+=(-); skipped+=(-); times+=(-)
      notes+=("$state ($reason): $message")
      continue
    fi
    local out rc start=$SECONDS
    out=$("$tool" check --backend "$name:0!" 2>&1) && rc=0 || rc=$?
    local elapsed="$((SECONDS - start))s" last
    last=$(printf '%s\n' "$out" | tail -n 1)
    names+=("$name:0"); times+=("$elapsed")
    if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
      passed+=("${BASH_REMATCH[1]}"); failed+=("${BASH_REMATCH[2]}"); skipped+=("${BASH_REMATCH[3]}")
      # Rows are "case  result  time  reason": name the failing and known-failing cases.
      local bad known note=""
      bad=$(printf '%s\n' "$out" | awk '$2 == "FAILED" || $2 == "XPASS" { printf "%s%s", sep, $1; sep = ", " }')
      known=$(printf '%s\n' "$out" | awk '$2 == "xfail" { printf "%s%s", sep, $1; sep = ", " }')
      [ -n "$bad" ] && note="failed: $bad"
      [ -n "$known" ] && note="${note:+$note; }xfail: $known"
      if [ "$rc" -eq 0 ]; then
        states+=("ran")
      elif [ "$rc" -eq 1 ]; then
        states+=("FAILED"); any_failed=1
      else
        states+=("FAILED"); any_failed=1; note="${note:+$note; }exit status $rc"
      fi
      notes+=("$note")
    else
      # No summary line: the process died. Its last line names the case it died in.
      states+=("CRASHED"); passed+=(-); failed+=(-); skipped+=(-); any_failed=1
      notes+=("exit status $rc; last output: $(printf "%s" "$last" | tr -s " ")")
    fi
  done <<<"$listing"

  echo
  echo "== conformance matrix ($build)"
  if ((${#names[@]} == 0)); then
    echo "no plugins found (search path: see '$tool list')"
    return 1
  fi
  local width=7 i
  for i in "${!names[@]}"; do ((${#names[i]} > width)) && width=${#names[i]}; done
  printf "%-${width}s  %-7s  %6s  %6s  %7s  %5s  %s\n" backend status passed failed skipped time note
  for i in "${!names[@]}"; do
    printf "%-${width}s  %-7s  %6s  %6s  %7s  %5s  %s\n" "${names[i]}" "${states[i]}" "${passed[i]}" \
      "${failed[i]}" "${skipped[i]}" "${times[i]}" "${notes[i]}"
  done
  return "$any_failed"
}
