# Helpers shared by the recipes (sourced from the repository root; bash).
#
#   log MSG...          timestamped progress line
#   build_voxspec       builds the release binary (features from $CARGO_FEATURES) and sets
#                       $voxspec to it ($CARGO_TARGET_DIR honoured)
#   vx ARGS...          runs voxspec with the recipe's global flags ($global: --threads, -v, ...)
#   init_stages EXP     finished stages are recorded under EXP/.done
#   run_stage N NAME    true when stage N lies in [$stage, $stop_stage] and NAME is not finished
#                       (or is named in $force_stages); mark it finished with finish_stage NAME
#   resume_flag DIR     prints --resume when DIR holds checkpoints of an interrupted run

log() { echo "[$(date +%H:%M:%S)] $*"; }

build_voxspec() {
  log "Building voxspec (release)"
  cargo build --release --quiet --bin voxspec ${CARGO_FEATURES:+--features "$CARGO_FEATURES"}
  voxspec="${CARGO_TARGET_DIR:-target}/release/voxspec"
}

vx() { "$voxspec" "${global[@]+"${global[@]}"}" "$@"; }

init_stages() {
  done_dir="$1/.done"
  mkdir -p "$done_dir"
}

run_stage() {
  local n="$1" name="$2" f
  [ "$n" -ge "$stage" ] && [ "$n" -le "$stop_stage" ] || return 1
  for f in "${force_stages[@]+"${force_stages[@]}"}"; do
    [ "$f" = "$name" ] && { rm -f "$done_dir/$name.done"; return 0; }
  done
  if [ -f "$done_dir/$name.done" ]; then
    log "Stage $n ($name): done before, skipping ($done_dir/$name.done)"
    return 1
  fi
  return 0
}

finish_stage() { touch "$done_dir/$1.done"; }

resume_flag() { compgen -G "$1/checkpoint-*" >/dev/null && echo --resume || true; }
