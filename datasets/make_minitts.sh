#!/usr/bin/env bash
# make_minitts.sh - synthesise the bundled "minitts" speech corpus (LibriTTS layout) offline
# from the Harvard sentences with flite + sox + flac, with phone alignments (TextGrids, made by
# align_minitts.sh).  See datasets/README.md.
#
# Output is deterministic: the same inputs and the same flite/sox/flac versions give
# byte-identical files on every run (no dither, no timestamps, no randomness).
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/.." && pwd)"

SENTENCES="$REPO_ROOT/../shared/data/harvard-sentences.txt"
OUT="$REPO_ROOT/datasets/minitts"
JOBS="$(nproc 2>/dev/null || echo 1)"

# Audio settings.
RATE=16000          # all four flite voices used are 16 kHz
RMS_DB=-27          # every utterance is scaled to this RMS level (dBFS, whole file) ...
PEAK_DB=-3          # ... unless that would put its peak above this level (dBFS)
PAD_S=0.15          # silence kept at each end after trimming (seconds)
FLAC_OPTS=(-8 -b 1152 --no-padding)   # highest level; small blocks suit short speech best

usage() {
  cat <<EOF
Usage: datasets/make_minitts.sh [options]

Synthesises the small LibriTTS-layout corpus datasets/minitts from the Harvard
sentences with flite (voices kal16, awb, rms, slt) and sox (pitch variants,
trimming, normalisation), encoded as 16 kHz mono 16-bit FLAC with flac.
Any existing output directory is replaced.  Reruns give byte-identical files.

Options:
  --sentences FILE  sentence list, one per line (default: <repo>/../shared/data/harvard-sentences.txt)
  --out DIR         output corpus directory (default: <repo>/datasets/minitts)
  --jobs N          parallel synthesis jobs (default: number of CPUs; does not change the output)
  -h, --help        show this help

Needs: flite, sox, flac (Debian/Ubuntu: sudo apt-get install -y flite sox flac).
EOF
}

die() { echo "make_minitts: error: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --sentences) [[ $# -ge 2 ]] || die "--sentences needs a file"; SENTENCES="$2"; shift 2 ;;
    --sentences=*) SENTENCES="${1#*=}"; shift ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a directory"; OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#*=}"; shift ;;
    --jobs) [[ $# -ge 2 ]] || die "--jobs needs a number"; JOBS="$2"; shift 2 ;;
    --jobs=*) JOBS="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer"

# ---------------------------------------------------------------- tools
missing=()
for tool in flite sox soxi flac; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  cat >&2 <<EOF
make_minitts: error: missing tool(s): ${missing[*]}
Install them with
    sudo apt-get update && sudo apt-get install -y flite sox flac
(Debian/Ubuntu; on other systems install flite >= 2.1 with the kal16, awb, rms and
slt voices, SoX >= 14.4 and the FLAC command-line tool).
Note: only making the corpus needs these tools; using it does not.
EOF
  exit 1
fi
voices="$(flite -lv)"
for v in kal16 awb rms slt; do
  [[ " $voices " == *" $v "* ]] || die "flite has no voice '$v' (flite -lv: $voices)"
done

[[ -f "$SENTENCES" ]] || die "sentence file not found: $SENTENCES (give one with --sentences)"

# ---------------------------------------------------------------- speakers
# speaker voice variant pitch(cents) duration_stretch gender subset first_list last_list
# Chapter id = Harvard list number (10 sentences each: list L = source lines 10L-9 .. 10L).
# Variant a = the voice as is; b = higher pitch (sox pitch, which also shifts the
# formants) and slower; c = lower pitch and faster.  Each sentence is read once at most.
SPEAKERS_TABLE='
1001 kal16 a    0 1.00 M train-clean-100  1  6
1002 kal16 b  350 1.08 M train-clean-100  7 12
1003 kal16 c -300 0.92 M train-clean-100 13 18
1004 awb   a    0 1.00 M train-clean-100 19 24
1005 awb   b  350 1.08 M train-clean-100 25 30
1007 rms   a    0 1.00 M train-clean-100 31 36
1009 rms   c -300 0.92 M train-clean-100 37 42
1010 slt   a    0 1.00 F train-clean-100 43 48
1012 slt   c -300 0.92 F train-clean-100 49 54
1008 rms   b  350 1.08 M dev-clean       55 58
1006 awb   c -300 0.92 M test-clean      59 61
1011 slt   b  350 1.08 F test-clean      62 64
'

# ---------------------------------------------------------------- work dirs
WORK="$(mktemp -d "${TMPDIR:-/tmp}/minitts.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
OUT_PARENT="$(dirname "$OUT")"
mkdir -p "$OUT_PARENT"
OUT="$(cd "$OUT_PARENT" && pwd)/$(basename "$OUT")"
if [[ -e "$OUT" && -n "$(ls -A "$OUT" 2>/dev/null)" && ! -f "$OUT/SPEAKERS.tsv" ]]; then
  die "$OUT exists, is not empty and does not look like a minitts corpus; refusing to replace it"
fi
STAGE="$OUT_PARENT/.$(basename "$OUT").new.$$"
rm -rf "$STAGE"
mkdir -p "$STAGE"
trap 'rm -rf "$WORK" "$STAGE"' EXIT

# ---------------------------------------------------------------- text
# Clean the source text (it carries typos such as "Xew pants" and "don??????t"):
#   CRs, runs of whitespace, leading/trailing blanks; mojibake apostrophes
#   (runs of '?', UTF-8 or double-encoded right single quotes) -> "'"; "Xew" -> "New";
#   stray capitals inside sentences ("A Tusk", "Cats and Dogs").
clean_text() {
  sed -e 's/\r//g' \
      -e 's/[[:space:]][[:space:]]*/ /g' -e 's/^ //' -e 's/ $//' \
      -e "s/\([A-Za-z]\)??*\([A-Za-z]\)/\1'\2/g" \
      -e "s/\xc3\xa2\xe2\x82\xac\xe2\x84\xa2/'/g" \
      -e "s/\xe2\x80[\x98\x99]/'/g" \
      -e 's/\bXew\b/New/g' \
      -e 's/^A Tusk /A tusk /' -e 's/ and Dogs / and dogs /' \
      "$1"
}
clean_text "$SENTENCES" > "$WORK/original.txt"
n_sent=$(wc -l < "$WORK/original.txt")
[[ "$n_sent" -ge 640 ]] || die "$SENTENCES has $n_sent lines; need the 720 Harvard sentences (at least 640)"
if bad=$(grep -n -e '?' -e '[^ -~]' -e '^$' "$WORK/original.txt"); then
  die "sentences still odd after cleaning (fix clean_text):"$'\n'"$bad"
fi

# Normalised text = original with numbers spelled out (LibriTTS style).  The Harvard
# sentences contain no digits, so for them both files are identical.
awk '
function words(n,   ones, tens, s) {
  split("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen", ones, " ")
  split("x twenty thirty forty fifty sixty seventy eighty ninety", tens, " ")
  if (n == 0) return "zero"
  s = ""
  if (n >= 1000000) { s = words(int(n / 1000000)) " million"; n %= 1000000; if (n) s = s " " }
  if (n >= 1000) { s = s words(int(n / 1000)) " thousand"; n %= 1000; if (n) s = s " " }
  if (n >= 100) { s = s ones[int(n / 100)] " hundred"; n %= 100; if (n) s = s " " }
  if (n >= 20) { s = s tens[int(n / 10)]; n %= 10; if (n) s = s "-" }
  if (n > 0) s = s ones[n]
  return s
}
{
  out = ""; line = $0
  while (match(line, /[0-9]+/)) {
    num = substr(line, RSTART, RLENGTH)
    if (RLENGTH > 9) { print "make_minitts: number too long to expand: " num > "/dev/stderr"; exit 1 }
    out = out substr(line, 1, RSTART - 1) words(num + 0)
    line = substr(line, RSTART + RLENGTH)
  }
  print out line
}' "$WORK/original.txt" > "$WORK/normalized.txt"

# ---------------------------------------------------------------- jobs
# One job line per utterance: speaker voice cents stretch subset chapter sentence_index
echo "$SPEAKERS_TABLE" | while read -r spk voice variant cents stretch gender subset first last; do
  [[ -n "${spk:-}" ]] || continue
  for ((list = first; list <= last; list++)); do
    for ((i = 10 * list - 9; i <= 10 * list; i++)); do
      echo "$spk $voice $cents $stretch $subset $list $i"
    done
  done
done > "$WORK/jobs.txt"

synth_one() {
  local spk=$1 voice=$2 cents=$3 stretch=$4 subset=$5 chapter=$6 idx=$7
  local utt dir tmp text gain pitch=()
  utt=$(printf '%s_%s_%06d_000000' "$spk" "$chapter" "$idx")
  dir="$STAGE/$subset/$spk/$chapter"
  tmp="$WORK/$utt"
  mkdir -p "$dir"
  text=$(sed -n "${idx}p" "$WORK/original.txt")
  [[ "$cents" != 0 ]] && pitch=(pitch "$cents")
  flite -voice "$voice" --setf duration_stretch="$stretch" -t "$text" -o "$tmp.raw.wav"
  # trim leading/trailing silence, shift pitch, re-pad (kept as float, no requantisation)
  sox -D -V1 "$tmp.raw.wav" -r "$RATE" -c 1 -e floating-point -b 32 "$tmp.f32.wav" \
    silence 1 0.02 -60d reverse silence 1 0.02 -60d reverse \
    "${pitch[@]}" pad "$PAD_S" "$PAD_S"
  # loudness: gain to RMS_DB, capped so that the peak stays <= PEAK_DB
  gain=$(sox "$tmp.f32.wav" -n stats 2>&1 | awk -v r="$RMS_DB" -v p="$PEAK_DB" '
    /^Pk lev dB/ {pk = $4} /^RMS lev dB/ {rms = $4}
    END { if (pk == "" || rms == "") exit 1; g = r - rms; if (pk + g > p) g = p - pk; printf "%.2f", g }')
  # 16-bit; -D: no dither, so reruns are byte-identical
  sox -D -V1 "$tmp.f32.wav" -b 16 -e signed-integer "$tmp.wav" gain "$gain"
  flac -s -f "${FLAC_OPTS[@]}" -o "$dir/$utt.flac" "$tmp.wav"
  printf '%s' "$text" > "$dir/$utt.original.txt"
  sed -n "${idx}p" "$WORK/normalized.txt" | tr -d '\n' > "$dir/$utt.normalized.txt"
  rm -f "$tmp.raw.wav" "$tmp.f32.wav" "$tmp.wav"
}
export -f synth_one
export WORK STAGE RATE RMS_DB PEAK_DB PAD_S
export FLAC_OPTS_STR="${FLAC_OPTS[*]}"

n_utt=$(wc -l < "$WORK/jobs.txt")
echo "make_minitts: synthesising $n_utt utterances with $JOBS job(s) ..." >&2
# (arrays cannot be exported; rebuild FLAC_OPTS inside each job)
xargs -P "$JOBS" -L 1 bash -c 'set -euo pipefail; read -ra FLAC_OPTS <<< "$FLAC_OPTS_STR"; synth_one "$@"' _ \
  < "$WORK/jobs.txt"

# ---------------------------------------------------------------- SPEAKERS.tsv
{
  printf 'speaker\tsubset\tvoice\tvariant\tpitch_cents\tduration_stretch\tgender\tchapters\tutterances\tminutes\n'
  echo "$SPEAKERS_TABLE" | sort -n | while read -r spk voice variant cents stretch gender subset first last; do
    [[ -n "${spk:-}" ]] || continue
    d="$STAGE/$subset/$spk"
    n=$(find "$d" -name '*.flac' | wc -l)
    samples=$(find "$d" -name '*.flac' | sort | xargs soxi -s | awk '{s += $1} END {print s}')
    minutes=$(awk -v s="$samples" -v r="$RATE" 'BEGIN {printf "%.2f", s / r / 60}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s-%s\t%s\t%s\n' \
      "$spk" "$subset" "$voice" "$variant" "$cents" "$stretch" "$gender" "$first" "$last" "$n" "$minutes"
  done
} > "$STAGE/SPEAKERS.tsv"

# ---------------------------------------------------------------- phone alignments
# <utt>.TextGrid beside every FLAC: re-runs each synthesis with flite -psdur and maps the phone
# times through the sox trimming/padding above (see align_minitts.sh).
"$SCRIPT_DIR/align_minitts.sh" --corpus "$STAGE" --jobs "$JOBS"

# ---------------------------------------------------------------- checks + install
n_flac=$(find "$STAGE" -name '*.flac' | wc -l)
[[ "$n_flac" -eq "$n_utt" ]] || die "expected $n_utt FLAC files, found $n_flac"
n_tg=$(find "$STAGE" -name '*.TextGrid' | wc -l)
[[ "$n_tg" -eq "$n_utt" ]] || die "expected $n_utt TextGrid files, found $n_tg"
find "$STAGE" -name '*.flac' | sort | while read -r f; do
  [[ -s "${f%.flac}.normalized.txt" && -s "${f%.flac}.original.txt" ]] || die "transcript missing for $f"
done
find "$STAGE" -exec touch -h -d '2000-01-01 00:00:00 UTC' {} +   # stable mtimes too
rm -rf "$OUT"
mv "$STAGE" "$OUT"
bytes=$(find "$OUT" -name '*.flac' -exec cat {} + | wc -c)
echo "make_minitts: wrote $n_flac utterances ($((bytes / 1000)) kB of FLAC) to $OUT" >&2
