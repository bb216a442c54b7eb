#!/usr/bin/env bash
# align_minitts.sh - exact phone alignments (Praat TextGrids) for the bundled minitts corpus.
# See datasets/README.md ("Phone alignments").
#
# minitts is synthetic: every utterance was made by make_minitts.sh from one flite call.
# This script repeats that call with -psdur (flite prints each phone's end time), and maps the
# times onto the shipped FLAC's timeline the way make_minitts.sh's sox chain moved the audio:
#
#   raw flite WAV --silence (leading trim, L samples)--> --reverse silence reverse (trailing trim)
#                 --pitch C (same length; the content moves by pitch_lag)--> --pad 0.15 0.15-->
#
#   t_final = t_flite - L / 16000 + pitch_lag + 0.15, clamped to [0, duration]; the last phone
#   (pau) ends at the duration.
#
# L is measured per utterance by running the leading `silence` effect alone and comparing
# sample counts.  The synthesis is re-run up to the padded float WAV, whose sample count must
# equal the shipped FLAC's (checked for every utterance; a mismatch is an error).  With
# --verify the gain/16-bit/FLAC steps are re-run too and the FLAC bytes compared.
#
# Output: <utt>.TextGrid beside every <utt>.flac (long ooTextFile format, one IntervalTier
# "phones" covering 0..duration; ARPAbet labels without stress, silence = "sil").
set -euo pipefail
export LC_ALL=C

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CORPUS="$SCRIPT_DIR/minitts"
JOBS="$(nproc 2>/dev/null || echo 1)"
VERIFY=0

# Must match make_minitts.sh.
RATE=16000
RMS_DB=-27
PEAK_DB=-3
PAD_S=0.15
FLAC_OPTS_STR="-8 -b 1152 --no-padding"

# sox `pitch` keeps the length (to +-1 sample) but moves the content: measured by cross-correlating
# the energy envelopes before and after `pitch` on 99 minitts utterances (0.5 ms envelopes,
# sub-millisecond peak interpolation; see datasets/README.md), the audio comes out this much
# later (seconds).  Only these two shifts are used by make_minitts.sh.
pitch_lag() {
  case "$1" in
    0) echo 0 ;;
    350) echo -0.0112 ;;
    -300) echo 0.0102 ;;
    *) echo "align_minitts: error: no measured pitch lag for $1 cents" >&2; return 1 ;;
  esac
}

usage() {
  cat <<EOF
Usage: datasets/align_minitts.sh [options]

Writes <utt>.TextGrid (phone alignment) beside every <utt>.flac of a minitts corpus by
re-running its flite synthesis with -psdur and mapping the phone times through the
sox trimming/padding of make_minitts.sh.  Every utterance's re-synthesised length is
checked against the shipped FLAC.

Options:
  --corpus DIR  minitts corpus (default: <repo>/datasets/minitts); needs its SPEAKERS.tsv
  --jobs N      parallel jobs (default: number of CPUs; does not change the output)
  --verify      also re-encode every FLAC and compare it byte for byte with the shipped one
  -h, --help    show this help

Needs: flite, sox, soxi, flac (Debian/Ubuntu: sudo apt-get install -y flite sox flac).
EOF
}

die() { echo "align_minitts: error: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --corpus) [[ $# -ge 2 ]] || die "--corpus needs a directory"; CORPUS="$2"; shift 2 ;;
    --corpus=*) CORPUS="${1#*=}"; shift ;;
    --jobs) [[ $# -ge 2 ]] || die "--jobs needs a number"; JOBS="$2"; shift 2 ;;
    --jobs=*) JOBS="${1#*=}"; shift ;;
    --verify) VERIFY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer"
[[ -f "$CORPUS/SPEAKERS.tsv" ]] || die "$CORPUS/SPEAKERS.tsv not found (is --corpus a minitts corpus?)"
CORPUS="$(cd "$CORPUS" && pwd)"

for tool in flite sox soxi flac awk; do
  command -v "$tool" >/dev/null 2>&1 || die "missing tool: $tool (sudo apt-get install -y flite sox flac)"
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/minitts-align.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/stats"

# ---------------------------------------------------------------- jobs
# speaker -> voice, pitch cents, duration stretch (columns of SPEAKERS.tsv, checked by name)
awk -F'\t' '
NR == 1 {
  for (i = 1; i <= NF; i++) col[$i] = i
  if (!("speaker" in col) || !("voice" in col) || !("pitch_cents" in col) || !("duration_stretch" in col)) {
    print "align_minitts: error: SPEAKERS.tsv lacks a speaker/voice/pitch_cents/duration_stretch column" > "/dev/stderr"
    exit 1
  }
  next
}
NF > 1 { print $col["speaker"], $col["voice"], $col["pitch_cents"], $col["duration_stretch"] }
' "$CORPUS/SPEAKERS.tsv" > "$WORK/speakers.txt"

find "$CORPUS" -mindepth 4 -maxdepth 4 -name '*.flac' | sort > "$WORK/flacs.txt"
n_utt=$(wc -l < "$WORK/flacs.txt")
[[ "$n_utt" -gt 0 ]] || die "no FLAC files under $CORPUS/<subset>/<speaker>/<chapter>/"
while read -r flac; do
  spk=$(basename "$(dirname "$(dirname "$flac")")")
  line=$(awk -v s="$spk" '$1 == s' "$WORK/speakers.txt")
  [[ -n "$line" ]] || die "speaker $spk of $flac is not in $CORPUS/SPEAKERS.tsv"
  echo "$flac ${line#* }"
done < "$WORK/flacs.txt" > "$WORK/jobs.txt"

# ---------------------------------------------------------------- one utterance
align_one() {
  local flac=$1 voice=$2 cents=$3 stretch=$4
  local utt base tmp text phones lag n_raw n_lead n_trim n_final n_shipped pitch=()
  base="${flac%.flac}"
  utt="$(basename "$base")"
  tmp="$WORK/$utt"
  [[ -s "$base.original.txt" ]] || { echo "align_minitts: error: $base.original.txt missing" >&2; return 1; }
  text=$(cat "$base.original.txt")
  [[ "$cents" != 0 ]] && pitch=(pitch "$cents")
  lag=$(pitch_lag "$cents")

  # 1. the synthesis of make_minitts.sh's synth_one, with the phone end times on stdout
  flite -voice "$voice" --setf duration_stretch="$stretch" -t "$text" -o "$tmp.raw.wav" -psdur \
    > "$tmp.psdur"
  phones=$(grep -E '^([a-z]+:[0-9]+(\.[0-9]+)? ?)+$' "$tmp.psdur" || true)
  if [[ -z "$phones" || $(printf '%s\n' "$phones" | wc -l) -ne 1 ]]; then
    echo "align_minitts: error: $flac: unexpected flite -psdur output: $(head -c 300 "$tmp.psdur")" >&2
    return 1
  fi

  # 2. sample counts: raw, after the leading trim alone, after both trims, final (padded)
  local fmt=(-r "$RATE" -c 1 -e floating-point -b 32)
  n_raw=$(soxi -s "$tmp.raw.wav")
  sox -D -V1 "$tmp.raw.wav" "${fmt[@]}" "$tmp.lead.wav" silence 1 0.02 -60d
  n_lead=$(soxi -s "$tmp.lead.wav")
  sox -D -V1 "$tmp.raw.wav" "${fmt[@]}" "$tmp.trim.wav" \
    silence 1 0.02 -60d reverse silence 1 0.02 -60d reverse
  n_trim=$(soxi -s "$tmp.trim.wav")
  sox -D -V1 "$tmp.raw.wav" "${fmt[@]}" "$tmp.f32.wav" \
    silence 1 0.02 -60d reverse silence 1 0.02 -60d reverse \
    "${pitch[@]}" pad "$PAD_S" "$PAD_S"
  n_final=$(soxi -s "$tmp.f32.wav")
  n_shipped=$(soxi -s "$flac")
  if [[ "$n_final" != "$n_shipped" ]]; then
    echo "align_minitts: error: $flac: re-synthesised length $n_final samples, shipped file has $n_shipped" \
      "(other flite/sox versions than the corpus was made with?)" >&2
    return 1
  fi

  # 3. optionally the rest of synth_one, and compare the FLAC bytes
  local same=-1 gain
  if [[ "$VERIFY" == 1 ]]; then
    gain=$(sox "$tmp.f32.wav" -n stats 2>&1 | awk -v r="$RMS_DB" -v p="$PEAK_DB" '
      /^Pk lev dB/ {pk = $4} /^RMS lev dB/ {rms = $4}
      END { if (pk == "" || rms == "") exit 1; g = r - rms; if (pk + g > p) g = p - pk; printf "%.2f", g }')
    sox -D -V1 "$tmp.f32.wav" -b 16 -e signed-integer "$tmp.wav" gain "$gain"
    read -ra flac_opts <<< "$FLAC_OPTS_STR"
    flac -s -f "${flac_opts[@]}" -o "$tmp.flac" "$tmp.wav"
    if cmp -s "$tmp.flac" "$flac"; then same=1; else same=0; fi
  fi

  # 4. map the phone ends onto the final timeline and write the TextGrid
  printf '%s\n' "$phones" | tr ' ' '\n' | awk -F: -v sr="$RATE" -v pad="$PAD_S" -v lag="$lag" \
      -v n_raw="$n_raw" -v n_lead="$n_lead" -v n_trim="$n_trim" -v n_final="$n_final" \
      -v utt="$utt" -v same="$same" -v stats="$WORK/stats/$utt" -v out="$tmp.TextGrid" '
    function fmt(t,   s) { s = sprintf("%.7f", t); sub(/0+$/, "", s); sub(/\.$/, "", s); return s }
    function arpabet(p) {
      if (p == "pau") return "sil"
      if (p == "ax") return "AH"
      if (p == "axr") return "ER"
      return toupper(p)
    }
    NF == 2 && $1 != "" { n++; lab[n] = $1; raw_end[n] = $2 + 0 }
    END {
      if (n == 0) { print "align_minitts: error: " utt ": no phones" > "/dev/stderr"; exit 1 }
      lead = (n_raw - n_lead) / sr      # seconds cut from the start
      kept = n_trim / sr                # seconds of audio kept between the trims
      dur = n_final / sr
      # speech phones (not pau): the first and the last, for the stats
      first_sp = 0; last_sp = 0
      for (i = 1; i <= n; i++) if (lab[i] != "pau") { if (!first_sp) first_sp = i; last_sp = i }
      m = 0; prev = 0; dropped = 0; dropped_sil = 0
      for (i = 1; i <= n; i++) {
        # Shift by the leading trim and the padding (and the pitch lag).  A phone that lay in
        # the trimmed audio (below -60 dBFS) keeps its length and lands in the digital silence
        # of the padding, so that the phone sequence stays complete.
        t = (i == n) ? dur : raw_end[i] - lead + lag + pad
        if (t < 0) t = 0
        if (t > dur) t = dur
        l = arpabet(lab[i])
        if (t - prev < 0.5 / sr) {       # nothing left of this phone after trimming
          if (l == "sil") dropped_sil++; else dropped++
          continue
        }
        if (m > 0 && l == "sil" && L[m] == "sil") { E[m] = t; prev = t; continue }   # merge
        m++; L[m] = l; S[m] = prev; E[m] = t; prev = t
      }
      if (E[m] != dur) {                 # the last phone was dropped: extend the previous one
        if (L[m] == "sil") E[m] = dur; else { m++; L[m] = "sil"; S[m] = prev; E[m] = dur }
      }
      printf "File type = \"ooTextFile\"\nObject class = \"TextGrid\"\n\n" > out
      printf "xmin = 0 \nxmax = %s \ntiers? <exists> \nsize = 1 \nitem []: \n", fmt(dur) > out
      printf "    item [1]:\n        class = \"IntervalTier\" \n        name = \"phones\" \n" > out
      printf "        xmin = 0 \n        xmax = %s \n        intervals: size = %d \n", fmt(dur), m > out
      for (k = 1; k <= m; k++) {
        printf "        intervals [%d]:\n", k > out
        printf "            xmin = %s \n            xmax = %s \n", fmt(S[k]), fmt(E[k]) > out
        printf "            text = \"%s\" \n", L[k] > out
      }
      # stats: utt, final samples, FLAC bytes same (1/0; -1 = not checked), psdur end - raw WAV
      # length, last speech phone end - end of the kept audio, first speech phone start - start
      # of the kept audio (raw timeline: > 0 / < 0: the phone reaches into the trimmed audio),
      # speech phones and silences lost, samples added by pitch, leading trim (s), speech phones
      # wholly in the trimmed start
      b = first_sp > 1 ? raw_end[first_sp - 1] : 0
      in_lead = 0
      for (i = 1; i <= n; i++) if (lab[i] != "pau" && raw_end[i] <= lead) in_lead++
      printf "%s %d %d %.4f %.4f %.4f %d %d %d %.4f %d\n", utt, n_final, same, raw_end[n] - n_raw / sr, \
        raw_end[last_sp] - (lead + kept), b - lead, dropped, dropped_sil, \
        n_final - n_trim - 2 * pad * sr, lead, in_lead > stats
    }'
  mv "$tmp.TextGrid" "$base.TextGrid"
  rm -f "$tmp".*
}
export -f align_one pitch_lag
export WORK RATE RMS_DB PEAK_DB PAD_S FLAC_OPTS_STR VERIFY

echo "align_minitts: aligning $n_utt utterances with $JOBS job(s) ..." >&2
xargs -P "$JOBS" -L 1 bash -c 'set -euo pipefail; align_one "$@"' _ < "$WORK/jobs.txt"

# ---------------------------------------------------------------- summary
n_stats=$(find "$WORK/stats" -type f | wc -l)
[[ "$n_stats" -eq "$n_utt" ]] || die "only $n_stats of $n_utt utterances were aligned"
sort "$WORK/stats/"* > "$WORK/stats.txt"
awk -v verify="$VERIFY" '
function abs(x) { return x < 0 ? -x : x }
{
  n++
  if ($3 == 1) same++
  if (n == 1 || $5 < e_lo) e_lo = $5
  if (n == 1 || $5 > e_hi) e_hi = $5
  if (n == 1 || $6 < s_lo) s_lo = $6
  if (n == 1 || $6 > s_hi) s_hi = $6
  dropped += $7
  if ($9 != 0) pitch_len++
  if (n == 1 || $10 < l_lo) l_lo = $10
  if (n == 1 || $10 > l_hi) l_hi = $10
  in_lead += $11
}
END {
  printf "align_minitts: %d utterances; re-synthesised length = shipped length for all %d\n", n, n
  if (verify == 1) printf "align_minitts: FLAC byte-identical to the shipped file: %d of %d\n", same, n
  printf "align_minitts: last speech phone end - end of trimmed audio: %+.4f .. %+.4f s\n", e_lo, e_hi
  printf "align_minitts: first speech phone start - start of trimmed audio: %+.4f .. %+.4f s\n", s_lo, s_hi
  printf "align_minitts: leading trim: %.4f .. %.4f s\n", l_lo, l_hi
  printf "align_minitts: speech phones wholly in the trimmed start (kept in the padding): %d\n", in_lead
  printf "align_minitts: speech phones lost to the trimming: %d\n", dropped
  printf "align_minitts: utterances whose length sox pitch changed: %d\n", pitch_len
}' "$WORK/stats.txt" >&2
if [[ -n "${ALIGN_MINITTS_STATS:-}" ]]; then cp "$WORK/stats.txt" "$ALIGN_MINITTS_STATS"; fi
