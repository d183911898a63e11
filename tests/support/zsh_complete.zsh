# Complete each argument's line in a real interactive zsh (zsh/zpty) with the completion
# functions in DIR loaded by compinit, and write the line as completion left it, one per line,
# as <LINE>, to OUT.   usage: zsh -f zsh_complete.zsh OUT DIR LINE...
# TAB completes; ^T (bound to a widget of ours) writes the buffer and clears it.
zmodload zsh/zpty
out=$1; dir=$2; shift 2
zpty z zsh -f -i
zpty -w z "fpath=(${(q)dir} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "dump() { print -r -- \"<\$BUFFER>\" >> ${(q)out}; BUFFER=; }; zle -N dump; bindkey '^T' dump"
for line in "$@"; do
    zpty -w -n z "$line"$'\t\x14'
done
local chunk
for i in {1..100}; do
    while zpty -r -t z chunk; do :; done
    [[ -f $out && $(wc -l < $out) -ge $# ]] && break
    sleep 0.1
done
zpty -d z
