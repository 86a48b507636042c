/*
 * test_bad_inputs.c - the catalogue of bad inputs: one table, one row per
 * way a researcher's input can be wrong (YAML, the command line,
 * checkpoints, data, plugins, results directories, resuming). Every row
 * runs the attnlab binary in a fresh directory holding a small finished
 * run, a stopped one and a plugin run (made once), and asserts what the
 * README promises: exit status 2, one line of output matching the row's
 * pattern (file:line:col or the key, and what is wrong), and that nothing
 * in the directory was created, changed or removed.
 *
 * Rows marked as_user need file permissions to bite: when the tests run as
 * root (where chmod 000 stops nobody), those rows run attnlab as the
 * unprivileged user nobody through setpriv(1), or are skipped with a
 * message where that is not possible.
 */
#include <ftw.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_sha256.h"
#include "al_test.h"
#include "al_util.h"

typedef struct bad_row {
    const char *what;      /* the category: what is wrong */
    const char *setup;     /* sh commands run first in the case's directory, or NULL */
    const char *args;      /* attnlab's arguments, as sh words */
    const char *pattern;   /* extended regex the one line of output must match */
    int as_user;           /* run unprivileged (permissions must bite) */
} bad_row;

/* Variables for setup and args: $A attnlab, $P the swa plugin, $B the
 * directory of the broken test plugins. The fixture (every case starts
 * with a copy): data.txt; good.yaml and sweep.yaml (experiment 'mine')
 * that train on it; run/ (finished, checkpoints), part/ (stopped at step
 * 4 of 8, resumable), swarun/ (finished, variant swa from libswa.so, a
 * copy of $P); foreign/ (the results of a sweep of experiment 'other'). */
#define EDIT_HEADER(py)                                                                   \
    "python3 -c 'import json,struct,sys\n"                                                \
    "b=open(\"run/model.safetensors\",\"rb\").read()\n"                                   \
    "n=struct.unpack(\"<Q\",b[:8])[0]\n"                                                  \
    "h=json.loads(b[8:8+n])\n" py "\n"                                                    \
    "t=json.dumps(h,separators=(\",\",\":\")).encode().ljust(n)\n"                      \
    "assert len(t)==n\n"                                                                  \
    "open(\"edited.safetensors\",\"wb\").write(b[:8]+t+b[8+n:])'"

static const bad_row rows[] = {
    /* ---- YAML */
    {"yaml: syntax error", "printf 'model: {n_head: 4\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:2:1: error: did not find expected ',' or '}'", 0},
    {"yaml: a tab", "printf 'model:\\n\\tn_head: 2\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:2:1: error: found character that cannot start any token", 0},
    {"yaml: duplicate key", "printf 'model:\\n  n_head: 2\\n  n_head: 4\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:3:3: error: duplicate key 'n_head' \\(first at line 2\\)", 0},
    {"yaml: wrong type (a word for an integer)", "printf 'model: {n_layer: two}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:18: error: 'model\\.n_layer' must be an integer, got 'two'", 0},
    {"yaml: wrong type (a list for a number)", "printf 'train: {lr: [1, 2]}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:13: error: 'train\\.lr' must be a number, got a sequence", 0},
    {"yaml: wrong type (a scalar for a mapping)", "printf 'model: 4\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:8: error: 'model' must be a mapping", 0},
    {"yaml: out of range (beta2)", "printf 'train: {beta2: 1.5}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:16: error: 'train\\.beta2' \\(1\\.5\\) must be in \\[0, 1\\)", 0},
    {"yaml: out of range (val_fraction)", "printf 'data: {val_fraction: 0}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:22: error: 'data\\.val_fraction' \\(0\\) must be in \\(0, 1\\)", 0},
    {"yaml: out of range (negative steps)", "printf 'train: {steps: -5}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:16: error: 'train\\.steps' \\(-5\\) must be positive", 0},
    {"yaml: impossible shape (n_kv_head)",
     "printf 'model: {n_head: 4, attention: {variant: gqa, n_kv_head: 3}}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'n_kv_head' \\(3\\) must divide 'n_head' \\(4\\)", 0},
    {"yaml: impossible shape (odd d_head)", "printf 'model: {d_head: 7}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:17: error: 'model\\.d_head' \\(7\\) must be even for RoPE", 0},
    {"yaml: impossible shape (d_model over n_head)",
     "printf 'model: {d_model: 30, n_head: 4}\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:1:[0-9]+: error: 'model\\.d_model' \\(30\\) is not divisible by 'model\\.n_head' \\(4\\)", 0},
    {"yaml: warmup longer than training", "printf 'train: {steps: 10, warmup_steps: 20}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'train\\.warmup_steps' \\(20\\) must be at most", 0},
    {"yaml: unknown variant", "printf 'model: {attention: {variant: flash}}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: unknown variant 'flash'", 0},
    {"yaml: unknown key", "printf 'model: {n_heads: 4}\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:1:9: error: unknown key 'n_heads' in 'model' \\(did you mean 'n_head'\\?\\)", 0},
    {"yaml: unknown plugin setting",
     "printf 'plugins: [libswa.so]\\nmodel: {attention: {variant: swa, windw: 4}}\\n' >bad.yaml",
     "train bad.yaml --out out",
     "^bad\\.yaml:2:[0-9]+: error: unknown key 'windw' for variant 'swa' \\(did you mean 'window'\\?\\)", 0},
    {"yaml: missing plugin setting",
     "printf 'plugins: [libswa.so]\\nmodel: {attention: {variant: swa}}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:2:[0-9]+: error: 'model\\.attention\\.window' is required for variant 'swa'", 0},
    {"yaml: plugin setting of the wrong type",
     "printf 'plugins: [libswa.so]\\nmodel: {attention: {variant: swa, window: 2.5}}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:2:[0-9]+: error: 'model\\.attention\\.window' must be an integer", 0},
    {"yaml: attention and layer_attention both given",
     "printf 'model: {attention: {variant: mha}, layer_attention: [{variant: mqa}]}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'model\\.attention' and "
     "'model\\.layer_attention' are both given", 0},
    {"yaml: unknown key in a layer_attention item",
     "printf 'model: {layer_attention: [{variant: mha}, {variant: gqa, n_kv_heads: 2}]}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:58: error: unknown key "
     "'model\\.layer_attention\\[1\\]\\.n_kv_heads' for variant 'gqa'", 0},
    {"yaml: layer_attention longer than n_layer",
     "printf 'model: {n_layer: 1, layer_attention: [{variant: mqa}, {variant: mha}]}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'model\\.layer_attention' lists "
     "2 attentions, more than 'model\\.n_layer' \\(1\\)", 0},
    {"yaml: a list at the top", "printf -- '- model\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:1:1: error: the top level must be a mapping, got a sequence", 0},
    {"yaml: two documents", "printf 'model: {}\\n---\\ntrain: {}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:[0-9]+:[0-9]+: error: only one YAML document is allowed", 0},
    {"yaml: an alias", "printf 'a: &x 1\\nmodel: {n_layer: *x}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:2:[0-9]+: error: aliases \\('\\*x'\\) are not supported", 0},
    {"yaml: unknown data source", "printf 'data: {source: wiki}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'data\\.source' .*wiki", 0},
    {"yaml: unknown kv_dtype", "printf 'model: {kv_dtype: f8}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'model\\.kv_dtype' .*f8", 0},
    {"yaml: unknown precision", "printf 'train: {precision: fp16}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'train\\.precision' .*fp16", 0},
    {"yaml: the file is missing", NULL, "train nothere.yaml --out out",
     "^nothere\\.yaml: cannot open: No such file or directory$", 0},
    {"yaml: the file is a directory", "mkdir cfg.yaml", "train cfg.yaml --out out",
     "^cfg\\.yaml: is a directory, not a file$", 0},
    {"yaml: a sweep axis that names no key",
     "printf 'sweep:\\n  grid:\\n    model.n_heads: [2, 4]\\n' >>sweep.yaml", "sweep sweep.yaml --out out",
     "^sweep\\.yaml:[0-9]+:5: error: sweep axis 'model\\.n_heads' names no setting \\(did you mean 'model\\.n_head'\\?\\)", 0},
    {"yaml: a sweep of too many trials",
     "printf 'sweep:\\n  seeds: 1000\\n  grid: {train.lr: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\\n' "
     ">>sweep.yaml", "sweep sweep.yaml --out out",
     "^sweep\\.yaml:[0-9]+:[0-9]+: error: the sweep expands to 11000 trials, at most 10000$", 0},
    {"yaml: zipped axes of different lengths",
     "printf 'sweep:\\n  zip:\\n    model.n_head: [1, 2]\\n    train.lr: [0.1]\\n' >>sweep.yaml",
     "sweep sweep.yaml --out out", "^sweep\\.yaml:[0-9]+:5: error: zip axis 'train\\.lr' has 1 values but", 0},
    {"yaml: a stage whose convert targets repeat (found by fuzzing)",
     "printf 'stages:\\n  - {name: base}\\n  - name: up\\n    from: base\\n    convert:\\n"
     "      to: [mqa, mqa]\\n      method: [mean]\\n    steps: [2]\\n' >>sweep.yaml", "sweep sweep.yaml --out out",
     "^sweep\\.yaml:[0-9]+:11: error: the sweep gives the same trial twice \\('mqa' and 'mqa'\\).*"
     "\\(in stage 'up'", 0},

    /* ---- the command line */
    {"cli: new-variant with a built-in variant's name", NULL, "new-variant gqa --out skel",
     "^attnlab: new-variant: NAME 'gqa' is a built-in variant's; choose another", 0},
    {"cli: new-variant where one of its two files exists (writes neither)",
     "mkdir skel && : >skel/meson.build", "new-variant mine --out skel",
     "^attnlab: new-variant: skel/meson\\.build exists; not overwriting it$", 0},
    {"cli: a sweep's trial whose experiment file changed since the sweep read it", NULL,
     "trial sweep.yaml --index 0 --out out --file-sha256 "
     "0000000000000000000000000000000000000000000000000000000000000000",
     "^attnlab: sweep\\.yaml: changed since the sweep started \\(SHA-256 000000000000\\.\\.\\. "
     "then, [0-9a-f]{12}\\.\\.\\. now\\); restore it, or start the sweep again", 0},
    {"cli: unknown flag", NULL, "train good.yaml --out out --frobnicate",
     "^attnlab: train: unknown option '--frobnicate' \\(see 'attnlab train --help'\\)$", 0},
    {"cli: missing value", NULL, "train good.yaml --out",
     "^attnlab: train: missing the value of --out \\(--out DIR\\)$", 0},
    {"cli: --set of an unknown key", NULL, "train good.yaml --out out --set model.n_headz=4",
     "^--set:1:7: error: unknown key 'n_headz' in 'model' \\(did you mean 'n_head'\\?\\)", 0},
    {"cli: --set without a value", NULL, "train good.yaml --out out --set model.n_head",
     "^--set:1:1: error: expected key\\.path=value, got 'model\\.n_head'", 0},
    {"cli: --set below a scalar", NULL, "train good.yaml --out out --set train.lr.x=1",
     "^--set:1:7: error: 'train\\.lr' must be a number, got a mapping", 0},
    {"cli: --set of a bad value", NULL, "train good.yaml --out out --set train.steps=many",
     "^--set:1:13: error: 'train\\.steps' must be an integer, got 'many'", 0},
    {"cli: bad --stop-after", NULL, "train good.yaml --out out --stop-after zero",
     "^attnlab: train: --stop-after wants an integer in \\[1, 2147483647\\], got 'zero'$", 0},
    {"cli: unknown command", NULL, "trian good.yaml", "^attnlab: unknown command 'trian'", 0},
    {"cli: a misspelt option", NULL, "train good.yaml --ot out",
     "^attnlab: train: unknown option '--ot' \\(did you mean '--out'\\?\\)", 0},
    {"cli: a number past its limit", NULL, "kv good.yaml --context 2147483647",
     "^attnlab: kv: --context wants an integer in \\[1, 1073741824\\], got '2147483647'$", 0},
    {"cli: --jobs 0", NULL, "sweep sweep.yaml --out out --jobs 0",
     "^attnlab: sweep: --jobs wants an integer in \\[1, 1024\\], got '0'", 0},
    {"cli: a second file", NULL, "train good.yaml other.yaml --out out",
     "^attnlab: train: unexpected argument 'other\\.yaml'", 0},
    {"cli: generate without a number", NULL, "generate run/model.safetensors --prompt hi --tokens lots",
     "^attnlab: generate: --tokens .*lots", 0},

    /* ---- checkpoints */
    {"checkpoint: truncated", "head -c 3000 run/model.safetensors >cut.safetensors",
     "score cut.safetensors data.txt",
     "^attnlab: cut\\.safetensors: .*(truncated|corrupt)", 0},
    {"checkpoint: not a safetensors file (a PNG)",
     "printf '\\211PNG\\r\\n\\032\\n0000000000000000' >pic.safetensors", "score pic.safetensors data.txt",
     "^attnlab: pic\\.safetensors: not a safetensors file, or truncated: header length [0-9]+ does not fit", 0},
    {"checkpoint: overlapping tensor offsets",
     EDIT_HEADER("k=sorted((k for k in h if k!=\"__metadata__\"),key=lambda k:h[k][\"data_offsets\"][0])[1]\n"
                 "b0,e0=h[k][\"data_offsets\"]\nh[k][\"data_offsets\"]=[b0-4,e0-4]"),
     "score edited.safetensors data.txt",
     "^attnlab: edited\\.safetensors: tensor '[^']+' starts at byte [0-9]+ of the data, expected [0-9]+ \\(overlapping", 0},
    {"checkpoint: a tensor's shape does not match its config",
     EDIT_HEADER("h[\"tok_emb.weight\"][\"shape\"]=[16,256]"), "score edited.safetensors data.txt",
     "^attnlab: edited\\.safetensors: tensor 'tok_emb\\.weight' has shape \\[16, 256\\], the model's config wants \\[256, 16\\]", 0},
    {"checkpoint: a plugin variant's, without the plugin", NULL,
     "score swarun/model.safetensors data.txt",
     "^attnlab: swarun/model\\.safetensors: attention variant 'swa' is not registered; it came from a plugin: pass --plugin /.*/libswa\\.so$", 0},
    {"checkpoint: resume from a truncated state",
     "head -c 2000 part/train_state.safetensors >x && mv x part/train_state.safetensors",
     "train --resume part", "^part/train_state\\.safetensors: .*\\(truncated or corrupt\\)$", 0},
    {"checkpoint: resume after the data changed", "echo more >>data.txt", "train --resume part",
     "^part/train_state\\.safetensors: cannot resume: the data file 'data\\.txt' changed since the run started \\(then [0-9]+ bytes", 0},
    {"checkpoint: resume after the plugin changed",
     "cp swa.yaml s.yaml && $A train s.yaml --out sp --stop-after 2 >/dev/null 2>&1 && "
     "printf x >>libswa.so",
     "train --resume sp", "^sp/train_state\\.safetensors: cannot resume: plugin '/.*/libswa\\.so' changed since the run started", 0},
    {"checkpoint: resume with another config", NULL, "train good.yaml --resume part --set train.lr=0.5",
     "^part/train_state\\.safetensors: cannot resume: 1 key differs from the saved run: 'train\\.lr' "
     "saved .*, now 0\\.5$", 0},
    {"checkpoint: resume with another precision and lr", NULL,
     "train good.yaml --resume part --set train.lr=0.5 --set train.precision=bf16",
     "^part/train_state\\.safetensors: cannot resume: 2 keys differ from the saved run: "
     "'train\\.lr' saved 0\\.001, now 0\\.5; 'train\\.precision' saved f32 \\(the default\\), "
     "now bf16$", 0},
    {"checkpoint: resume of a finished run", NULL, "train --resume run",
     "^run: nothing to resume: the run has done all 8 steps", 0},

    /* ---- data */
    {"data: an empty file", ": >empty.txt", "train good.yaml --out out --set data.path=empty.txt",
     "^'data\\.path' \\('empty\\.txt'\\): too short: 0 bytes", 0},
    {"data: shorter than one window", "printf 'tiny' >short.txt",
     "train good.yaml --out out --set data.path=short.txt",
     "^'data\\.path' \\('short\\.txt'\\): too short: 4 bytes give", 0},
    {"data: a directory", "mkdir dir.txt", "train good.yaml --out out --set data.path=dir.txt",
     "^'data\\.path': dir\\.txt: is a directory, not a file$", 0},
    {"data: unreadable", "cp data.txt locked.txt && chmod 000 locked.txt",
     "train good.yaml --out out --set data.path=locked.txt",
     "^'data\\.path': locked\\.txt: cannot open: Permission denied$", 1},
    {"data: missing", NULL, "train good.yaml --out out --set data.path=gone.txt",
     "^'data\\.path': gone\\.txt: cannot open: No such file or directory$", 0},
    {"data: too short for a sweep's trial", "printf 'tiny' >short.txt",
     "sweep sweep.yaml --out out --set data.path=short.txt",
     "^--set:1:11: error: 'data\\.path' \\('short\\.txt'\\): too short", 0},
    {"data: scoring a file shorter than a window", "printf 'tiny' >short.txt",
     "score run/model.safetensors short.txt", "^attnlab: short\\.txt: too short: 4 bytes", 0},

    /* ---- plugins */
    {"plugin: not an ELF file", "echo 'not a library' >libnot.so",
     "train good.yaml --out out --plugin ./libnot.so",
     "^attnlab: \\./libnot\\.so: not a loadable shared object \\(", 0},
    {"plugin: no entry point", NULL, "train good.yaml --out out --plugin $B/libbroken_no_entry.so",
     "^attnlab: /.*/libbroken_no_entry\\.so: no entry point 'attnlab_plugin_variants' \\(not an attnlab plugin\\)$", 0},
    {"plugin: another interface version", NULL,
     "train good.yaml --out out --plugin $B/libbroken_bad_plugin_version.so",
     "^attnlab: /.*: plugin was built for variant interface version [0-9]+, this attnlab has version [0-9]+", 0},
    {"plugin: a variant name already taken", NULL,
     "train good.yaml --out out --plugin $B/libbroken_duplicate.so",
     "^attnlab: /.*/libbroken_duplicate\\.so: variant 'mha' is already registered by built-in$", 0},
    {"plugin: listed in the file but missing", "printf 'plugins: [nope.so]\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:11: error: plugin 'nope\\.so': No such file or directory", 0},

    /* ---- results directories */
    {"results: another experiment's", NULL, "sweep sweep.yaml --out foreign",
     "^attnlab: foreign: belongs to experiment 'other' \\(from .*\\), not 'mine'; choose another --out", 0},
    {"results: a directory that is no sweep's", NULL, "sweep sweep.yaml --out run",
     "^attnlab: run: not empty and not a sweep's results directory \\(no sweep\\.json\\); choose another --out$", 0},
    {"results: a read-only directory (sweep)", "mkdir ro && chmod 555 ro", "sweep sweep.yaml --out ro",
     "^attnlab: ro/\\.lock: cannot write: Permission denied$", 1},
    {"results: a read-only directory (train)", "mkdir ro && chmod 555 ro", "train good.yaml --out ro",
     "^ro/\\.lock: cannot write: Permission denied$", 1},
    {"results: report of a directory without results", "mkdir empty", "report empty",
     "^attnlab: empty/summary\\.csv: cannot open: No such file or directory$", 0},

    /* ---- run directories: one run each (issue 26) */
    {"rundir: train --out a finished run", NULL, "train good.yaml --out run",
     "^run: holds a run already; continue a stopped one with 'attnlab train --resume run', or "
     "choose a new --out \\(--force overwrites it\\)$", 0},
    {"rundir: train --out a stopped run", NULL, "train good.yaml --out part",
     "^part: holds a run already; continue a stopped one with 'attnlab train --resume part'", 0},
    {"rundir: train --out a symlink to a run", "ln -s run lnk", "train good.yaml --out lnk",
     "^lnk: holds a run already", 0},
    {"rundir: train --out a sweep's results", NULL, "train good.yaml --out foreign",
     "^foreign: is a sweep's results directory \\(sweep\\.json\\); choose another --out$", 0},
    {"rundir: train --out a symlink to a sweep's results", "ln -s foreign fl",
     "train good.yaml --out fl", "^fl: is a sweep's results directory", 0},
    {"rundir: --force does not overwrite a sweep's results", NULL,
     "train good.yaml --out foreign --force", "^foreign: is a sweep's results directory", 0},
    {"rundir: train --out /", NULL, "train good.yaml --out /",
     "^/: refusing to write a run into '/'; choose another --out$", 0},
    {"rundir: train --out / with --force", NULL, "train good.yaml --out // --force",
     "^//: refusing to write a run into '/'", 0},
    {"rundir: a user's own model.safetensors", "mkdir mine && cp run/model.safetensors mine/",
     "train good.yaml --out mine",
     "^mine: not empty \\(holds 'model\\.safetensors'\\); choose an empty or new --out", 0},
    {"rundir: --out is a file", NULL, "train good.yaml --out data.txt",
     "^data\\.txt: exists and is not a directory; choose another --out$", 0},
    {"rundir: a run another process holds (resume)",
     "(flock part/.lock sleep 6 >/dev/null 2>&1 &) && sleep 0.5", "train --resume part",
     "^part: in use by another run \\(attnlab pid [0-9]+\\); wait for it to end", 0},
    {"rundir: a run another process holds (--force)",
     "(flock run/.lock sleep 6 >/dev/null 2>&1 &) && sleep 0.5",
     "train good.yaml --out run --force", "^run: in use by another run \\(attnlab pid [0-9]+\\)", 0},
    {"rundir: a sweep another process holds",
     "(flock foreign/.lock sleep 6 >/dev/null 2>&1 &) && sleep 0.5",
     "sweep other.yaml --out foreign", "^attnlab: foreign: in use by another sweep", 0},
    {"rundir: attention --out a file", NULL,
     "attention run/model.safetensors --prompt hi --out data.txt",
     "^attnlab: data\\.txt: exists and is not a directory; choose another --out$", 0},
    {"rundir: generate --out a file", NULL,
     "generate run/model.safetensors --prompt hi --out data.txt",
     "^attnlab: data\\.txt: exists and is not a directory; choose another --out$", 0},

    /* ---- inputs that are no regular files, or too large (issue 26) */
    {"file: a FIFO as config", "mkfifo f.yaml", "train f.yaml --out out",
     "^f\\.yaml: is a FIFO, not a regular file$", 0},
    {"file: a device as config", NULL, "train /dev/null --out out",
     "^/dev/null: is a character device, not a regular file$", 0},
    {"file: a FIFO as sweep file", "mkfifo s.yaml", "sweep s.yaml --out out",
     "^s\\.yaml: is a FIFO, not a regular file$", 0},
    {"file: a FIFO as kv's config", "mkfifo f.yaml", "kv f.yaml",
     "^f\\.yaml: is a FIFO, not a regular file$", 0},
    {"file: a config over 1 MiB",
     "python3 -c 'open(\"big.yaml\",\"w\").write(\"#\"*1100000+\"\\n\")'", "train big.yaml --out out",
     "^big\\.yaml: too large \\(1100001 bytes, at most 1048576\\)$", 0},
    {"file: a sweep file over 1 MiB",
     "python3 -c 'open(\"big.yaml\",\"w\").write(\"name: mine\\n\"+\"#\"*1100000+\"\\n\")'",
     "sweep big.yaml --out out", "^big\\.yaml: too large \\([0-9]+ bytes, at most 1048576\\)$", 0},
    {"file: a FIFO as data", "mkfifo f.txt", "train good.yaml --out out --set data.path=f.txt",
     "^'data\\.path': f\\.txt: is a FIFO, not a regular file$", 0},
    {"file: a device as data", NULL, "train good.yaml --out out --set data.path=/dev/zero",
     "^'data\\.path': /dev/zero: is a character device, not a regular file$", 0},
    {"file: a FIFO as the file scored", "mkfifo f.txt", "score run/model.safetensors f.txt",
     "^attnlab: f\\.txt: is a FIFO, not a regular file$", 0},
    {"file: a FIFO as checkpoint", "mkfifo f.safetensors", "score f.safetensors data.txt",
     "^attnlab: f\\.safetensors: is a FIFO, not a regular file$", 0},
    {"file: a directory as checkpoint", NULL, "score run data.txt",
     "^attnlab: run: is a directory, not a file$", 0},
    {"file: a device as checkpoint", NULL, "generate /dev/zero --prompt hi",
     "^attnlab: /dev/zero: is a character device, not a regular file$", 0},
    {"file: a FIFO as --init-from", "mkfifo f.safetensors",
     "train good.yaml --out out --init-from f.safetensors",
     "^train\\.init_from: f\\.safetensors: is a FIFO, not a regular file$", 0},
    {"file: a FIFO as the saved state",
     "rm part/train_state.safetensors && mkfifo part/train_state.safetensors", "train --resume part",
     "^part/train_state\\.safetensors: is a FIFO, not a regular file$", 0},
    {"file: a FIFO as prompt file", "mkfifo p.txt",
     "generate run/model.safetensors --prompt-file p.txt",
     "^attnlab: p\\.txt: is a FIFO, not a regular file$", 0},
    {"file: a FIFO as attention's --file", "mkfifo p.txt",
     "attention run/model.safetensors --file p.txt --out maps",
     "^attnlab: p\\.txt: is a FIFO, not a regular file$", 0},
    {"file: a FIFO as --plugin", "mkfifo libf.so", "train good.yaml --out out --plugin ./libf.so",
     "^attnlab: \\./libf\\.so: cannot load plugin: a FIFO, not a regular file$", 0},
    {"file: a directory as --plugin", "mkdir libd.so", "kv good.yaml --plugin ./libd.so",
     "^attnlab: \\./libd\\.so: cannot load plugin: a directory, not a regular file$", 0},
    {"file: a FIFO in the config's plugins", "mkfifo libf.so && printf 'plugins: [libf.so]\\n' >bad.yaml",
     "train bad.yaml --out out",
     "^bad\\.yaml:1:11: error: /.*/libf\\.so: cannot load plugin: a FIFO, not a regular file$", 0},

    /* ---- numbers a double cannot hold (issue 26) */
    {"number: lr underflows", "printf 'train: {lr: 1e-400}\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:1:13: error: 'train\\.lr' must be a number a double can hold, got '1e-400' "
     "\\(underflows\\)$", 0},
    {"number: lr overflows", "printf 'train: {lr: 1e400}\\n' >bad.yaml", "train bad.yaml --out out",
     "^bad\\.yaml:1:13: error: 'train\\.lr' must be a number a double can hold, got '1e400' "
     "\\(overflows\\)$", 0},
    {"number: a negative overflow", "printf 'train: {weight_decay: -1E+400}\\n' >bad.yaml",
     "train bad.yaml --out out", "^bad\\.yaml:1:[0-9]+: error: 'train\\.weight_decay' must be a "
     "number a double can hold, got '-1E\\+400' \\(overflows\\)$", 0},
    {"number: an integer key overflows", "printf 'train: {steps: 1e400}\\n' >bad.yaml",
     "train bad.yaml --out out",
     "^bad\\.yaml:1:[0-9]+: error: 'train\\.steps' must be an integer, got '1e400' \\(out of range\\)$", 0},
    {"number: --set underflows", NULL, "train good.yaml --out out --set train.beta1=0.1e-399",
     "^--set:1:13: error: 'train\\.beta1' must be a number a double can hold, got '0\\.1e-399'", 0},
    {"number: kv --set overflows", NULL, "kv good.yaml --set model.mlp_ratio=1e999",
     "^--set:1:17: error: 'model\\.mlp_ratio' must be a number a double can hold, got '1e999'", 0},
    {"number: a sweep value underflows",
     "printf 'sweep:\\n  grid: {train.lr: [0.1, 1e-400]}\\n' >>sweep.yaml", "sweep sweep.yaml --out out",
     "error: 'train\\.lr' must be a number a double can hold, got '1e-400' \\(underflows\\)", 0},
    {"number: a byte count with an unknown unit", NULL,
     "train good.yaml --out out --set train.max_memory=5X",
     "^--set:1:18: error: 'train\\.max_memory' must be a byte count \\(digits, with k, M, G or T", 0},
    {"number: a byte count past 2^64", NULL,
     "train good.yaml --out out --set train.max_memory=99999999999T",
     "^--set:1:18: error: 'train\\.max_memory' must be a byte count", 0},
    {"number: d_model past what a checkpoint can hold", NULL,
     "kv good.yaml --set model.d_model=2147483646 --set model.d_head=2",
     "^--set:1:15: error: 'model\\.d_model' \\(2147483646\\) must be at most 16384$", 0},

    /* ---- sizes whose memory cannot exist (issue 26) */
    {"memory: n_layer and d_model at their largest", NULL,
     "train good.yaml --out out --set model.n_layer=16384 --set model.d_model=16384",
     "^good\\.yaml: 'model\\.n_layer' \\(16384\\) x 'model\\.d_model' \\(16384\\): 52777099214848 "
     "parameters \\(weights, gradients, AdamW moments\\) need [0-9]+ bytes \\([0-9.]+ TiB\\), more "
     "than the [0-9]+ bytes .* of the machine's memory$", 0},
    {"memory: batch_size 2147483647", NULL,
     "train good.yaml --out out --set train.batch_size=2147483646",
     "^good\\.yaml: 'train\\.batch_size' \\(2147483646\\) x 'model\\.seq_len' \\(16\\): the model and "
     "at least the activations of 1 layer\\(s\\) need [0-9]+ bytes", 0},
    {"memory: seq_len x batch_size of 10^10", NULL,
     "train good.yaml --out out --set train.batch_size=100000000 --set model.seq_len=100",
     "^good\\.yaml: 'train\\.batch_size' \\(100000000\\) x 'model\\.seq_len' \\(100\\): .* need "
     "[0-9]+ bytes", 0},
    {"memory: more than train.max_memory", NULL,
     "train good.yaml --out out --set train.max_memory=200k",
     "^good\\.yaml: 'train\\.batch_size' \\(2\\) x 'model\\.seq_len' \\(16\\): the model and the "
     "activations of 1 layer\\(s\\) need [0-9]+ bytes \\([0-9.]+ KiB\\), more than the 204800 bytes "
     "\\(200\\.0 KiB\\) of train\\.max_memory$", 0},
    {"memory: a model larger than train.max_memory", NULL,
     "train good.yaml --out out --set train.max_memory=1k",
     "^good\\.yaml: 'model\\.n_layer' \\(1\\) x 'model\\.d_model' \\(16\\): 7216 parameters", 0},
    {"memory: a KV cache at --context past 64 bits", NULL,
     "kv good.yaml --set model.n_layer=16384 --set model.n_head=8192 --set model.d_head=8192 "
     "--context 1073741824",
     "^attnlab: kv: --context 1073741824: [0-9]+ KV-cache bytes per token times 1073741824 tokens "
     "overflow 18446744073709551615$", 0},
    {"number: n_layer past what a checkpoint can hold", NULL,
     "kv good.yaml --set model.n_layer=2147483647 --set model.d_model=32768 --set model.n_head=256",
     "^--set:1:15: error: 'model\\.n_layer' \\(2147483647\\) must be at most 16384$", 0},

    /* ---- sizes computed from settings, in checked arithmetic (issue 40) */
    {"size: a tensor past 2^31 elements names the keys (kv)", NULL,
     "kv good.yaml --set model.n_head=16384 --set model.d_head=16384",
     "^attnlab: model\\.attention: variant 'mha': 'model\\.d_model' \\(16\\), 'model\\.n_head' "
     "\\(16384\\) and 'model\\.d_head' \\(16384\\) with the attention's settings make tensor "
     "'wq' \\[268435456, 16\\], more than 2147483647 elements$", 0},
    {"size: a tensor past 2^31 elements names the keys (train)", NULL,
     "train good.yaml --out out --set model.n_head=16384 --set model.d_head=16384",
     "^good\\.yaml: model\\.attention: variant 'mha': 'model\\.d_model' \\(16\\), "
     "'model\\.n_head' \\(16384\\) and 'model\\.d_head' \\(16384\\) with", 0},
    {"size: a window past what a checkpoint holds", NULL,
     "train good.yaml --out out --set 'model.attention={variant: local, window: 100, sinks: 2147483647}'",
     "^--set:1:[0-9]+: error: 'model\\.attention\\.sinks' \\(2147483647\\) must be in "
     "\\[-16384, 16384\\]$", 0},
    {"size: a quantization group past what a checkpoint holds", NULL,
     "kv good.yaml --set model.kv_quant_group=2147483647 --set model.kv_dtype=int4",
     "^--set:1:[0-9]+: error: 'model\\.kv_quant_group' \\(2147483647\\) must be at most 16777216$", 0},

    /* ---- plugins that lie (issue 26) */
    {"plugin: an entry point that is data", NULL,
     "train good.yaml --out out --plugin $B/libbroken_data_entry.so",
     "^attnlab: /.*/libbroken_data_entry\\.so: entry point 'attnlab_plugin_variants' is a data "
     "symbol, not a function \\(not an attnlab plugin\\)$", 0},
    {"plugin: KV-cache floats past the limit", NULL,
     "kv good.yaml --plugin $B/libbroken_huge_sizes.so --set model.attention.variant=tp_first",
     "^attnlab: model\\.attention: variant 'tp_first' reports 9223372036854775807 KV-cache floats "
     "per token per layer, more than the limit of 1099511627776$", 0},
    {"plugin: sizes past the limit in training", NULL,
     "train good.yaml --out out --plugin $B/libbroken_huge_sizes.so "
     "--set model.attention.variant=tp_first",
     "^good\\.yaml: model\\.attention: variant 'tp_first' reports 9223372036854775807 ", 0},
    {"plugin: bench-decode loads the config's plugins:",
     "(printf 'plugins: [%s]\\n' \"$B/libbroken_data_entry.so\"; cat good.yaml) >bp.yaml",
     "bench-decode bp.yaml --variants mha --contexts 64 --tokens 2 --out b.csv",
     "^attnlab: bp\\.yaml:1:11: error: /.*/libbroken_data_entry\\.so: entry point 'attnlab_plugin_variants' "
     "is a data symbol", 0},
    {"plugin: bench-decode of a plugin variant with lying sizes", NULL,
     "bench-decode good.yaml --plugin $B/libbroken_huge_sizes.so --variants tp_first "
     "--contexts 64 --tokens 2 --out b.csv",
     "^attnlab: model\\.attention: variant 'tp_first' reports 9223372036854775807 ", 0},
};

/* ------------------------------------------------------------ the fixture */

static char fixture[4096];

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[16384], *out;
    snprintf(cmd, sizeof cmd, fmt, a, b);
    if (al_test_run(cmd, &out) != 0) {
        fprintf(stderr, "bad_inputs: fixture failed: %s\n%s\n", cmd, out);
        abort();
    }
    free(out);
}

static void make_fixture(void)
{
    char *d = al_test_tmpdir(), env[8192];
    snprintf(fixture, sizeof fixture, "%s", d);
    free(d);
    snprintf(env, sizeof env, "cd '%s' && A='%s' && P='%s' &&", fixture, al_test_binary(),
             AL_SWA_PLUGIN);
    sh("%s python3 -c 'import random\n"
       "random.seed(3)\n"
       "w=[\"the \",\"king \",\"and \",\"queen \",\"of \",\"sea \",\".\\n\"]\n"
       "open(\"data.txt\",\"w\").write(\"\".join(random.choice(w) for _ in range(600)))'", env, "");
    sh("%s printf 'data: {source: text, path: data.txt}\\n"
       "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\\n"
       "train: {steps: 8, batch_size: 2, eval_every: 4, eval_batches: 1, warmup_steps: 1, "
       "threads: 1, checkpoint_every: 4}\\n' >good.yaml && "
       "(printf 'name: mine\\n'; cat good.yaml) >sweep.yaml && "
       "(printf 'name: other\\n'; cat good.yaml) >other.yaml && cp \"$P\" libswa.so && "
       "sed 's/seq_len: 16}/seq_len: 16, attention: {variant: swa, window: 4}}/' good.yaml >swa.yaml && "
       "printf 'plugins: [libswa.so]\\n' >>swa.yaml && "
       "$A train good.yaml --out run && $A train good.yaml --out part --stop-after 4 && "
       "$A train swa.yaml --out swarun && $A sweep other.yaml --out foreign", env, "");
}

static void remove_tree(const char *dir)
{
    sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
}

static void drop_fixture(void) { remove_tree(fixture); }

/* ------------------------------------------------------------ snapshots */

/* Every entry under a directory: "path kind digest" lines, sorted by nftw's
 * walk (stable for an unchanged tree). */
static char *snap_buf;
static size_t snap_len, snap_cap;
static size_t snap_root;

static void snap_add(const char *line)
{
    size_t n = strlen(line);
    if (snap_len + n + 1 > snap_cap) {
        snap_cap = 2 * (snap_len + n + 1);
        snap_buf = realloc(snap_buf, snap_cap);
    }
    memcpy(snap_buf + snap_len, line, n + 1);
    snap_len += n;
}

static int snap_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    char line[8192], hex[65] = "-";
    if (S_ISREG(st->st_mode) && (st->st_mode & S_IRUSR)) {
        char *buf;
        size_t n;
        al_err e;
        if (al_read_file(path, &buf, &n, &e) == 0) {
            al_sha256_hex(buf, n, hex);
            free(buf);
        }
    }
    /* a file's time too (rewritten with the same bytes is rewritten), not a
     * directory's (a temp file made and removed again is no change) */
    long long t = S_ISDIR(st->st_mode) ? 0
                  : (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    snprintf(line, sizeof line, "%s %o %lld %s\n", path + snap_root, (unsigned)st->st_mode, t,
             hex);
    snap_add(line);
    return 0;
}

static int by_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The snapshot as sorted lines (malloc'ed text). */
static char *snapshot(const char *dir)
{
    snap_len = 0;
    snap_root = strlen(dir);
    snap_add("");
    nftw(dir, snap_one, 16, FTW_PHYS);
    int n = 0;
    for (size_t i = 0; i < snap_len; i++) n += snap_buf[i] == '\n';
    char **lines = malloc((size_t)(n + 1) * sizeof *lines), *save;
    char *copy = strdup(snap_buf);
    int k = 0;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) lines[k++] = l;
    qsort(lines, k, sizeof *lines, by_line);
    char *out = calloc(snap_len + 2, 1);
    for (int i = 0; i < k; i++) strcat(strcat(out, lines[i]), "\n");
    free(lines), free(copy);
    return out;
}

/* The first line of a that is not in b, or NULL. */
static const char *missing_line(const char *a, const char *b, char *line, size_t n)
{
    for (const char *p = a; *p;) {
        size_t len = strcspn(p, "\n");
        snprintf(line, n, "%.*s", (int)len, p);
        char *probe = malloc(len + 3);
        snprintf(probe, len + 3, "\n%s\n", line);
        int found = strncmp(b, line, len) == 0 && b[len] == '\n';
        found |= strstr(b, probe) != NULL;
        free(probe);
        if (!found) return line;
        p += len + (p[len] == '\n');
    }
    return NULL;
}

/* ------------------------------------------------------------ running a row */

/* "setpriv ..." when this row must run unprivileged and we are root; ""
 * when we are not root; NULL when we are root and cannot drop privileges. */
static const char *unprivileged(void)
{
    if (geteuid() != 0) return "";
    if (al_test_run("command -v setpriv", NULL) != 0) return NULL;
    return "setpriv --reuid=65534 --regid=65534 --clear-groups ";
}

START_TEST(bad_input_exits_2_with_one_clear_line_and_changes_nothing)
{
    const bad_row *r = &rows[_i];
    const char *drop = r->as_user ? unprivileged() : "";
    if (!drop) {
        printf("skipped: %s (as root, and setpriv cannot drop privileges)\n", r->what);
        return;
    }
    char *dir = al_test_tmpdir(), env[8192], cmd[32768], *out, line[8192];
    snprintf(env, sizeof env, "cd '%s' && A='%s' && P='%s' && B='%s' &&", dir, al_test_binary(),
             AL_SWA_PLUGIN, AL_BROKEN_PLUGIN_DIR);
    snprintf(cmd, sizeof cmd, "cp -r '%s'/. '%s'/", fixture, dir);
    ck_assert_int_eq(al_test_run(cmd, NULL), 0);
    if (r->setup) {
        snprintf(cmd, sizeof cmd, "%s %s", env, r->setup);
        ck_assert_msg(al_test_run(cmd, &out) == 0, "%s: setup failed: %s", r->what, out);
        free(out);
    }
    if (*drop) {   /* the unprivileged user must reach the files */
        snprintf(cmd, sizeof cmd, "chmod 755 '%s'", dir);
        ck_assert_int_eq(al_test_run(cmd, NULL), 0);
    }
    char *before = snapshot(dir);
    snprintf(cmd, sizeof cmd, "%s %s\"$A\" %s", env, drop, r->args);
    int rc = al_test_run(cmd, &out);
    char *after = snapshot(dir);
    ck_assert_msg(rc == 2, "%s: exit %d, not 2:\n%s", r->what, rc, out);
    size_t len = strlen(out);
    ck_assert_msg(len > 1 && out[len - 1] == '\n' && !memchr(out, '\n', len - 1),
                  "%s: not one line:\n%s", r->what, out);
    out[len - 1] = 0;   /* the pattern's $ is the line's end */
    regex_t re;
    ck_assert_int_eq(regcomp(&re, r->pattern, REG_EXTENDED | REG_NOSUB), 0);
    ck_assert_msg(regexec(&re, out, 0, NULL, 0) == 0, "%s:\n  got  %s\n  want %s", r->what, out,
                  r->pattern);
    regfree(&re);
    ck_assert_msg(!missing_line(before, after, line, sizeof line), "%s: changed or removed: %s",
                  r->what, line);
    ck_assert_msg(!missing_line(after, before, line, sizeof line), "%s: created or changed: %s",
                  r->what, line);
    free(before), free(after), free(out);
    remove_tree(dir);
    free(dir);
}
END_TEST

/* The catalogue's own promise: at least 100 rows, every category present
 * (issue 26 added run directories, inputs that are no regular files,
 * numbers out of a double's range, memory and lying plugins). */
START_TEST(catalogue_covers_every_kind_of_input)
{
    static const char *const kinds[] = {"yaml:", "cli:", "checkpoint:", "data:", "plugin:",
                                        "results:", "rundir:", "file:", "number:", "memory:", "size:",
                                        NULL};
    int n = (int)(sizeof rows / sizeof rows[0]);
    ck_assert_int_ge(n, 100);
    for (int k = 0; kinds[k]; k++) {
        int found = 0;
        for (int i = 0; i < n; i++) found += strncmp(rows[i].what, kinds[k], strlen(kinds[k])) == 0;
        ck_assert_msg(found >= 4, "only %d rows of kind %s", found, kinds[k]);
    }
}
END_TEST

Suite *bad_inputs_suite(void)
{
    Suite *s = suite_create("bad_inputs");
    TCase *tc = tcase_create("bad_inputs");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, make_fixture, drop_fixture);
    tcase_add_test(tc, catalogue_covers_every_kind_of_input);
    tcase_add_loop_test(tc, bad_input_exits_2_with_one_clear_line_and_changes_nothing, 0,
                        (int)(sizeof rows / sizeof rows[0]));
    suite_add_tcase(s, tc);
    return s;
}
