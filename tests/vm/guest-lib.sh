# shellcheck shell=sh
# What the guest scripts of guest-daemon-test.sh, guest-dino-test.sh and
# guest-balancing-test.sh share
# (busybox sh, in the guest). lib.sh's pack_initramfs puts it at
# /guest-lib.sh; a guest script sources it with `. /guest-lib.sh`.
#
# Results are collected as `"key": value` fragments in $RES (/tmp/res, emptied
# here) and printed as one JSON object by print_results.

RES=/tmp/res
: > $RES
sep=""
# add FRAGMENT: one "key": value member of the result object.
add() { printf '%s%s\n' "$sep" "$1" >> $RES; sep=","; }
# A file's content as a JSON string (lines joined with \n).
json_text() {
  if [ -f "$1" ]; then
    tr -d '\001-\010\013-\037' < "$1" | awk 'BEGIN { printf "\"" } { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, " "); gsub(/\r/, ""); printf "%s\\n", $0 } END { printf "\"" }'
  else
    echo null
  fi
}
# A file of JSON lines as a JSON array ([] when absent or empty).
json_lines() {
  printf '['
  [ -f "$1" ] && awk 'NF { printf "%s%s", sep, $0; sep = "," }' "$1"
  printf ']'
}
# Uptime in hundredths of a second.
# shellcheck disable=SC2162  # /proc/uptime has no backslashes
centis() { read up rest < /proc/uptime; echo "${up%.*}${up#*.}"; }
# Whether process $1 has ended (gone, or a zombie not yet waited for).
ended() {
  [ -r "/proc/$1/stat" ] || return 0
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  [ -z "$st" ] || [ "$st" = Z ]
}
# wait_ready FILE PID WHAT: waits (<= 120 s) for PID's "ready PID" line.
wait_ready() {
  i=0
  until grep -q "^ready $2\$" "$1" 2>/dev/null; do
    if ended "$2"; then echo "guest: $3 exited before it was ready"; return 1; fi
    i=$((i + 1))
    if [ $i -gt 1200 ]; then echo "guest: $3 not ready after 120 s"; return 1; fi
    usleep 100000
  done
}
# print_results BEGIN END: the result object, with the daemon's journal
# (/tmp/np/journal.jsonl, if any) as "journal": [...], between a BEGIN and an
# END line; then the raw journal between @@NUMAPLACE-GUEST-JOURNAL-BEGIN@@ /
# -END@@ lines.
print_results() {
  add "\"journal\": ["
  sep=""
  if [ -f /tmp/np/journal.jsonl ]; then
    while IFS= read -r line; do
      [ -n "$line" ] || continue
      printf '%s%s\n' "$sep" "$line" >> $RES
      sep=","
    done < /tmp/np/journal.jsonl
  fi
  echo "]" >> $RES
  echo "$1"
  echo "{"
  cat $RES
  echo "}"
  echo "$2"
  echo "@@NUMAPLACE-GUEST-JOURNAL-BEGIN@@"
  cat /tmp/np/journal.jsonl 2>/dev/null
  echo "@@NUMAPLACE-GUEST-JOURNAL-END@@"
}
