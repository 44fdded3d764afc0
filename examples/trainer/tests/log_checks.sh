# Sourced by the trainer's shell tests: counting checks, and comparing two runs' log.csv losses.
# The sourcing script sets `tolerance` before it calls same_losses.

failures=0
checks=0
pass() { checks=$((checks + 1)); echo "ok   $1"; }
# fail NAME [LOG]: a failed check, with the end of LOG if given.
fail() {
  checks=$((checks + 1))
  failures=$((failures + 1))
  echo "FAIL $1"
  [[ -n ${2:-} && -f $2 ]] && sed 's/^/    /' "$2" | tail -15
}

# same_losses A B: the train and validation losses of two logs agree within the tolerance.
same_losses() {
  paste -d, <(cut -d, -f1,4,5 "$1/log.csv") <(cut -d, -f1,4,5 "$2/log.csv") | awk -F, -v tol="$tolerance" '
    NR == 1 { next }
    $1 != $4 { print "step " $1 " against step " $4; bad = 1; exit }
    { for (i = 2; i <= 3; ++i) { d = $i - $(i + 3); if (d < 0) d = -d; if (d > worst) worst = d
        if (($i == "") != ($(i + 3) == "") || d > tol) { print "step " $1 ": " $i " against " $(i + 3); bad = 1 } } }
    END { if (!bad) printf "largest difference %.3g (tolerance %g)%s\n", worst, tol, worst == 0 ? ", bit for bit" : ""; exit bad }'
}
