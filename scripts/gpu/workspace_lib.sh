# Shared by the device scripts that run kbot's loop in a packed workspace (contest_campaign.sh,
# submit_variants.sh); source it after setting PY, K (the kbot command as an array), WS and OUT.

# unpack_workspace: WORKSPACE_TAR (when set) into WS, refusing to mix it with an existing workspace. A warm
# device keeps the workspace an earlier call left in WS: when its forge is byte for byte the tarball's (the
# tarball is that call's packed result), it is the same workspace and is used as it is.
unpack_workspace() {
  [ -n "${WORKSPACE_TAR:-}" ] || return 0
  if [ -e "$WS" ]; then
    local peek same=1
    peek=$(mktemp -d)
    tar -C "$peek" -xzf "$WORKSPACE_TAR" ./forge 2>/dev/null || tar -C "$peek" -xzf "$WORKSPACE_TAR" forge 2>/dev/null || same=0
    [ "$same" = 1 ] && diff -rq "$peek/forge" "$WS/forge" >/dev/null 2>&1 || same=0
    rm -rf "$peek"
    if [ "$same" = 1 ]; then
      echo "WORKSPACE_TAR: $WS already holds its forge (left by an earlier call on this machine): using it" >&2; return 0
    fi
    echo "WORKSPACE_TAR given but $WS exists with another forge: refusing to mix workspaces" >&2; exit 2
  fi
  mkdir -p "$WS" && tar -C "$WS" -xzf "$WORKSPACE_TAR" || { echo "cannot unpack $WORKSPACE_TAR" >&2; exit 2; }
}

# write_pr_records: `kbot pr list` and `kbot pr show` of every PR, appended to $OUT/records.txt.
write_pr_records() {
  {
    "${K[@]}" pr list --workspace "$WS"
    for n in $("${K[@]}" pr list --workspace "$WS" --json | "$PY" -c "import json,sys; print(' '.join(str(p['number']) for p in json.load(sys.stdin)))"); do
      echo "================================================================ PR $n"
      "${K[@]}" pr show "$n" --workspace "$WS"
    done
  } >> "$OUT/records.txt" 2>&1
}

# pack_workspace: the workspace without build folders or compiled objects, as $OUT/workspace.tar.gz.
pack_workspace() {
  tar -C "$WS" --exclude='build' --exclude='build_*' --exclude='*.so' --exclude='__pycache__' -czf "$OUT/workspace.tar.gz" .
}
