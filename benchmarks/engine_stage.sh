# Shared by benchmarks/*_engine/stage.sh (sourced, bash): fetch cp312 wheels for the lent H200, build a
# graphfix wheel from a checkout's committed HEAD, and pack a site folder into tar.xz pieces of < PART_MB.
# Nothing here runs on the device; the device side is benchmarks/engine_unpack.sh.

# pip download options for the device's python 3.12 on x86-64 (pip matches manylinux tags exactly)
STAGE_PIP=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none
           --platform manylinux_2_39_x86_64 --platform manylinux_2_35_x86_64 --platform manylinux_2_34_x86_64
           --platform manylinux_2_31_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 --platform any)

# stage_whl CACHE NAME==VER: path of the cached wheel (empty if none)
stage_whl() {
  local c=$1 s=$2 name ver glob
  name=${s%%==*}; ver=${s#*==}; glob=$(echo "$name" | tr - _)
  ls "$c"/"$glob"-"$ver"-*.whl "$c"/"$name"-"$ver"-*.whl 2>/dev/null | head -1
}

# stage_fetch CACHE NAME==VER...: download each wheel not cached yet
stage_fetch() {
  local c=$1 s; shift; mkdir -p "$c"
  for s in "$@"; do
    [ -n "$(stage_whl "$c" "$s")" ] || python3 -m pip download -q "${STAGE_PIP[@]}" -d "$c" "$s"
  done
}

# stage_unzip DIR WHEEL...: unpack wheels into DIR (== pip install --no-deps --target, .dist-info kept)
stage_unzip() { local to=$1 w; shift; mkdir -p "$to"; for w in "$@"; do unzip -qo "$w" -d "$to"; done; }

# stage_graphfix SRC DIR: graphfix wheel from SRC's committed HEAD (clean export, not the working tree),
# unpacked into DIR, with DIR/GRAPHFIX_REV naming the commit
stage_graphfix() {
  local src=$1 dir=$2 tmp rev; tmp=$(mktemp -d)
  git -C "$src" archive --format=tar HEAD | (mkdir -p "$tmp/src" && tar -x -C "$tmp/src")
  python3 -m pip wheel -q --no-deps -w "$tmp/gf" "$tmp/src"
  rev="$(git -C "$src" rev-parse --short HEAD) ($(git -C "$src" log -1 --format=%s | cut -c1-70))"
  stage_unzip "$dir" "$tmp"/gf/*.whl
  echo "graphfix $rev $(ls "$tmp"/gf)" > "$dir/GRAPHFIX_REV"
  rm -rf "$tmp"
}

# stage_pack DIR NAME DST CACHE [REUSE]: DIR -> CACHE/NAME.tar.xz (kept and reused when REUSE=1) ->
# DST/part-NAME.tar.xz.0, .1, ... of < PART_MB MiB; appends "NAME PIECES" to DST/bin/parts.txt
stage_pack() {
  local dir=$1 name=$2 dst=$3 cache=$4 reuse=${5:-0} t
  t=$(date +%s); mkdir -p "$dst/bin"
  if [ "$reuse" != 1 ] || [ ! -f "$cache/$name.tar.xz" ]; then
    tar -C "$dir" -cf - . | xz -T2 -6 > "$cache/$name.tar.xz.new" && mv "$cache/$name.tar.xz.new" "$cache/$name.tar.xz"
  fi
  rm -f "$dst"/part-"$name".tar.xz.*
  split -b "${PART_MB:-58}m" -d -a 1 "$cache/$name.tar.xz" "$dst/part-$name.tar.xz."
  echo "$name $(ls "$dst"/part-"$name".tar.xz.* | wc -l)" >> "$dst/bin/parts.txt"
  echo "$name packed in $(( $(date +%s) - t )) s: $(du -sh "$cache/$name.tar.xz" | cut -f1)"
}
