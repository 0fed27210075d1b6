# Shared by benchmarks/*_engine/device.sh (sourced, bash), ON THE CUDA MACHINE: unpack the carried part
# pieces that stage.sh made (see benchmarks/engine_stage.sh).
#   engine_unpack BIN SITE GF PARTS
# BIN is the carried bin/ folder (parts.txt beside the scripts; the pieces are in BIN/..). Pieces are
# copied to PARTS (kept while the machine stays warm, so a part may come over several calls); every
# part except p3 unpacks into SITE once (marker SITE/.done-NAME); p3 (graphfix + scripts, re-made from
# the current main) replaces GF whenever it comes.
engine_unpack() {
  local bin=$1 site=$2 gf=$3 parts=$4 piece name n have dest t t0
  mkdir -p "$site" "$parts"; t0=$(date +%s.%N)
  for piece in "$bin"/../part-*.tar.xz.*; do [ -e "$piece" ] && cp "$piece" "$parts"/; done
  while read -r name n; do
    have=$(ls "$parts"/part-"$name".tar.xz.* 2>/dev/null | wc -l)
    if [ "$have" -lt "$n" ]; then echo "part $name: $have/$n pieces here"; continue; fi
    if [ "$name" = p3 ]; then
      [ -e "$bin/../part-p3.tar.xz.0" ] || { [ -d "$gf" ] && continue; }
      rm -rf "$gf"; mkdir -p "$gf"; dest=$gf
    else
      [ -e "$site/.done-$name" ] && continue; dest=$site
    fi
    t=$(date +%s.%N)
    cat "$parts"/part-"$name".tar.xz.* | xz -d -T0 | tar -x -C "$dest" && touch "$site/.done-$name"
    echo "part $name: unpacked in $(awk "BEGIN{print $(date +%s.%N) - $t}") s into $dest ($(du -sh "$dest" | cut -f1))"
  done < "$bin/parts.txt"
  echo "stage: $(awk "BEGIN{print $(date +%s.%N) - $t0}") s"
  [ -f "$gf/GRAPHFIX_REV" ] && cat "$gf/GRAPHFIX_REV"
  return 0
}

# engine_parts_ready SITE NAME...: all named parts unpacked?
engine_parts_ready() {
  local site=$1 p; shift
  for p in "$@"; do [ -e "$site/.done-$p" ] || { echo "part $p missing: cannot run"; return 2; }; done
}
