#!/usr/bin/env bash
# Rebuilds datasets/kathleen (real read speech, one U.S. English woman, CC0) from the FLAC copy of
# rhasspy/dataset-voice-kathleen, in the LibriTTS layout that `voxspec prepare` reads with
# `--train-subsets train --dev-subsets dev --test-subsets test`:
#
#   <out>/<split>/kathleen/arctic/<id>.ogg              Ogg Vorbis, 16 kHz mono (oggenc -q Q)
#   <out>/<split>/kathleen/arctic/<id>.normalized.txt   the transcript, one line, no newline
#   <out>/SPLITS.tsv, <out>/LICENSE, <out>/SOURCE_README.md
#
# Splits are grouped by prompt. Among the prompts read exactly once, sorted by the md5 of the
# prompt id, the first 100 are test and the next 30 dev; every other recording is train.
# Output is deterministic: a fixed Ogg serial per file (from the md5 of its id), no comments
# copied from the source, file times set to 2000-01-01; a rerun gives the same bytes.
# Only the files listed above are written or removed: README.md and any *.TextGrid in <out>
# are left as they are.
#
# Usage: datasets/make_kathleen.sh [--src DIR] [--out DIR] [--quality Q] [--jobs N]
#   --src DIR      source folder with manifest.tsv, audio/, LICENSE, SOURCE_README.md
#                  [<repo>/../shared/data/kathleen]
#   --out DIR      the bundle [<repo>/datasets/kathleen]
#   --quality Q    oggenc quality, -1 (its minimum at 16 kHz mono, ~16 kb/s nominal) to 10 [2]
#   --jobs N       parallel oggenc processes [2]; does not change the output
# Needs: oggenc (Debian: apt-get install vorbis-tools), metaflac (flac), md5sum, awk.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$repo/../shared/data/kathleen"
out="$repo/datasets/kathleen"
quality=2
jobs=2
N_TEST=100
N_DEV=30

die() { echo "make_kathleen.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --src) src="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --quality) quality="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
for tool in oggenc metaflac md5sum awk; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install -y vorbis-tools flac)"
done
[[ -f "$src/manifest.tsv" && -d "$src/audio" ]] || die "no manifest.tsv and audio/ in $src"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer"
awk -v q="$quality" 'BEGIN { exit !(q ~ /^-?[0-9]+(\.[0-9]+)?$/ && q >= -1 && q <= 10) }' \
    || die "--quality must be a number from -1 to 10"
head -1 "$src/manifest.tsv" | grep -qx $'id\tprompt_id\tpath\tduration_s\ttranscript' \
    || die "$src/manifest.tsv: expected the header id, prompt_id, path, duration_s, transcript"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C

# Every source file must be 16 kHz mono FLAC (oggenc keeps the rate and channels).
tail -n +2 "$src/manifest.tsv" | cut -f3 | sed "s|^|$src/|" > "$tmp/flacs"
xargs -d '\n' metaflac --show-sample-rate --show-channels < "$tmp/flacs" | paste - - \
    | awk '$1 !~ /:16000$/ || $2 !~ /:1$/ { print "not 16 kHz mono: " $0; bad = 1 } END { exit bad }' >&2 \
    || die "unexpected audio format (above)"

# Splits: prompts with exactly one take, ordered by md5(prompt id).
tail -n +2 "$src/manifest.tsv" | cut -f2 | sort | uniq -c | awk '$1 == 1 { print $2 }' \
    | while read -r p; do printf '%s %s\n' "$(printf '%s' "$p" | md5sum | cut -c1-32)" "$p"; done \
    | sort | awk -v t="$N_TEST" -v d="$N_DEV" \
        'NR <= t { print $2 "\ttest" } NR > t && NR <= t + d { print $2 "\tdev" }' > "$tmp/held"
[[ $(wc -l < "$tmp/held") -eq $((N_TEST + N_DEV)) ]] || die "fewer than $((N_TEST + N_DEV)) one-take prompts"
awk -F'\t' -v OFS='\t' 'NR == FNR { split_of[$1] = $2; next }
    FNR == 1 { next }
    { s = ($2 in split_of) ? split_of[$2] : "train"; print $1, $2, s, $4, $3, $5 }' \
    "$tmp/held" "$src/manifest.tsv" | sort > "$tmp/rows"   # id prompt split dur path text

# Replace the audio and transcripts (leave README.md and *.TextGrid alone).
mkdir -p "$out"
for s in train dev test; do
    if [[ -d "$out/$s" ]]; then
        find "$out/$s" -type f \( -name '*.ogg' -o -name '*.normalized.txt' \) -delete
    fi
    mkdir -p "$out/$s/kathleen/arctic"
done
while IFS=$'\t' read -r id _ s _ _ text; do
    printf '%s' "$text" > "$out/$s/kathleen/arctic/$id.normalized.txt"
done < "$tmp/rows"

encode() {  # one line: id <TAB> split <TAB> path
    local id split path
    IFS=$'\t' read -r id split path <<< "$1"
    local serial=$(( 16#$(printf '%s' "$id" | md5sum | cut -c1-7) ))
    oggenc -Q -q "$quality" --serial "$serial" --discard-comments \
        -o "$out/$split/kathleen/arctic/$id.ogg" "$src/$path" \
        || { echo "make_kathleen.sh: oggenc failed on $src/$path" >&2; return 255; }
}
export -f encode
export quality out src
cut -f1,3,5 "$tmp/rows" | xargs -P "$jobs" -d '\n' -n 1 bash -c 'encode "$1"' encode
n_ogg=$(find "$out" -name '*.ogg' | wc -l)
[[ "$n_ogg" -eq $(wc -l < "$tmp/rows") ]] || die "expected $(wc -l < "$tmp/rows") ogg files, found $n_ogg"

{ printf 'id\tprompt_id\tsplit\tduration_s\n'; cut -f1-4 "$tmp/rows"; } > "$out/SPLITS.tsv"
install -m 644 "$src/LICENSE" "$out/LICENSE"
install -m 644 "$src/SOURCE_README.md" "$out/SOURCE_README.md"
find "$out" -path "$out/README.md" -prune -o -name '*.TextGrid' -prune -o -print0 \
    | xargs -0 touch -h -d '2000-01-01 00:00:00 UTC'

echo "kathleen bundle in $out (oggenc -q $quality):"
printf 'split\tprompts\trecordings\tminutes\tMB (ogg)\n'
for s in train dev test; do
    mb=$(find "$out/$s" -name '*.ogg' -printf '%s\n' | awk '{ b += $1 } END { printf "%.2f", b / 1e6 }')
    awk -F'\t' -v s="$s" -v mb="$mb" '$3 == s { n++; m += $4; p[$2] = 1 }
        END { printf "%s\t%d\t%d\t%.2f\t%s\n", s, length(p), n, m / 60, mb }' "$out/SPLITS.tsv"
done
echo "total size (du -sb): $(du -sb "$out" | cut -f1) bytes"
