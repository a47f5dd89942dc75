#!/bin/sh
# The layering of sluice's sources, checked from their #include lines (make test runs it first).
#
# Each folder has a layer. A file includes headers of its own folder and of folders in lower
# layers; never one of its own layer (siblings know nothing of each other) or of a higher one.
# So no two folders include each other either, and a cycle is reported as such as well.
#
#  10  gateway            main.c and modules.c: the command line, signals, the pipeline's wiring
#   9  gateway/front      the HTTP adapter: libmicrohttpd, the serving modes, waits, the server
#   8  gateway/modules/*  one folder per concern of a request: route, access, limit, forward,
#                         log (each a module of the pipeline; siblings know nothing of each other)
#   7  gateway/core       the library-neutral request, its phases, the module interface, the
#                         pipeline that runs them, the runtime (a loaded config's state)
#   6  gateway/ops        metrics, the access log, the config watch, sluice simulate
#   5  gateway/limits     a request's limits chosen and asked, with no HTTP in it
#   4  gateway/identity   gateway/routing   gateway/store   gateway/upstream
#   3  gateway/common     helpers every gateway folder uses
#   2  config             YAML to a validated config
#   1  limiter            the algorithms and the client table
#
# limits sits above identity and store because it decides over what they give: a consumer
# (identity/consumers.h) picks the plan, and the shared store's result (store/store.h) is one
# of the decisions' inputs; and below ops and the modules, because simulate (ops) and the
# gateway's limit module both call it, so that a replayed request meets the limits a served one
# met. ops sits above identity and routing because it uses them: the access log writes key
# sources (identity/keys.h) and simulate replays a request's route, consumer and keys. core
# sits above ops because a request counts itself (metrics) and carries its log entry; the
# modules above core, each including the core and the layers below, never a sibling: what two
# of them share goes on the core request (the client, the consumer, the refusal, the answer).
# The adapter (front) is above the modules only to name its own module; it calls none of
# them: it drives the pipeline. Tests sit above everything and may include any of it.
#
# A library is included only in its folders, directly or through a header of the tree (a
# header that includes a library brings it to every file that includes the header):
#
#   <microhttpd.h>  gateway/front (the HTTP adapter, while it has no folder of its own)
#   <curl/...>      gateway/upstream; and config/urls.c, which reads the config's URLs with
#                   libcurl's own URL parser (config is below the gateway: it cannot call it)
#   <hiredis/...>   gateway/store
#   <yaml.h>        config
#   <gnutls/...>    config (certificate files), gateway/front (TLS on the wire)
#
# libsodium (hashes, randomness; no I/O) may be used anywhere; tests use what they need.
#
# Includes name their folder: a "..." include is the header's path from the top of the tree,
# the one place the Makefile has the compiler look ("-iquote ."). So the folder of every
# include is written in it and this script resolves nothing: it reads the folder off the
# include, which is also what a reader of the file sees. A name that is not such a path (a
# bare "log.h", a "../x.h") is reported too.
set -eu
cd "$(dirname "$0")/.."

LAYERS='
limiter 1
config 2
gateway/common 3
gateway/identity 4
gateway/routing 4
gateway/store 4
gateway/upstream 4
gateway/limits 5
gateway/ops 6
gateway/core 7
gateway/modules/* 8
gateway/front 9
gateway 10
'
LIBRARIES='
microhttpd.h libmicrohttpd gateway/front
curl/ libcurl gateway/upstream config/urls.c
hiredis/ hiredis gateway/store
yaml.h libyaml config
gnutls/ GnuTLS config gateway/front
'

files=$(find limiter config gateway tests -name '*.[ch]' | sort)
# The files, a line "--", then each include line as file:line:text.
{
    printf '%s\n' $files --
    grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' $files
} | awk -v layers="$LAYERS" -v libraries="$LIBRARIES" '
function folder(path) { return sub(/\/[^\/]*$/, "", path) ? path : "." }
function is_test(path) { return path ~ /^tests\// }
# A folder listed as "PARENT/*" gives each folder right below PARENT its layer.
function layer_of(dir,    parent) {
    if (dir in layer) return layer[dir]
    parent = dir; sub(/\/[^\/]*$/, "/", parent)
    if (parent in family && index(substr(dir, length(parent) + 1), "/") == 0)
        layer[dir] = family[parent]
    return dir in layer ? layer[dir] : ""
}
# Each problem as it is found, told in the order of files and lines once all are found.
function problem(text) { print text | "sort -t: -k1,1 -k2,2n"; problems++ }
BEGIN {
    n = split(layers, l, "\n")
    for (i = 1; i <= n; i++)
        if (split(l[i], f, " ") == 2 && f[1] ~ /\/\*$/)
            family[substr(f[1], 1, length(f[1]) - 1)] = f[2]
        else if (split(l[i], f, " ") == 2)
            layer[f[1]] = f[2]
    n = split(libraries, l, "\n")
    for (i = 1; i <= n; i++) {
        if (split(l[i], f, " ") < 3)
            continue
        n_libs++
        lib_prefix[n_libs] = f[1]
        lib_name[n_libs] = f[2]
        lib_where[n_libs] = ""
        for (j = 3; j in f; j++)
            lib_where[n_libs] = lib_where[n_libs] (j > 3 ? ", " : " ") f[j]
    }
}
!listed {
    if ($0 == "--") { listed = 1; next }
    exists[$0] = 1
    base = $0; sub(/.*\//, "", base)
    named[base] = named[base] " " $0
    next
}
# One include: the layers now; the libraries it brings are followed through headers at the end.
{
    file = $0; sub(/:.*/, "", file)
    at = $0; sub(/^[^:]*:/, "", at); sub(/:.*/, "", at)
    text = $0; sub(/^[^:]*:[^:]*:/, "", text)
    where = file ":" at
    dir = folder(file)
    layer_of(dir)
    includes++
    if (!is_test(file) && !(dir in layer) && !(dir in told)) {
        problem(where ": " dir "/ has no layer: give it one in tests/layering-check.sh")
        told[dir] = 1
    }
    if (text ~ /^[^"]*</) {
        header = text; sub(/^[^<]*</, "", header); sub(/>.*/, "", header)
        for (i = 1; i <= n_libs; i++)
            if (index(header, lib_prefix[i]) == 1 && !((file, i) in brings)) {
                brings[file, i] = where
                from[file, i] = "<" header ">"
            }
        next
    }
    header = text; sub(/^[^"]*"/, "", header); sub(/".*/, "", header)
    if (!(header in exists)) {
        base = header; sub(/.*\//, "", base)
        if (base in named)
            problem(where ": \"" header "\" does not name its folder: write the path of the " \
                    "header from the top of the tree (" substr(named[base], 2) ")")
        else
            problem(where ": \"" header "\" is no header of the tree")
        next
    }
    n_quoted++
    quoted_file[n_quoted] = file
    quoted_where[n_quoted] = where
    quoted_header[n_quoted] = header
    to = folder(header)
    layer_of(to)
    if (is_test(file) || to == dir || !(dir in layer) || !(to in layer))
        next
    if (!((dir, to) in edge))
        edge[dir, to] = where " includes " header
    if (layer[to] > layer[dir])
        problem(where ": \"" header "\" runs upward: " dir " (layer " layer[dir] ") " \
                "includes its own folder and lower layers only, and " to " is layer " layer[to])
    else if (layer[to] == layer[dir])
        problem(where ": \"" header "\" runs across: " dir " and " to " are both layer " \
                layer[dir] ", and neither includes the other")
}
END {
    # A file brings a library when it includes it, or includes a header that brings it.
    do {
        more = 0
        for (k = 1; k <= n_quoted; k++)
            for (i = 1; i <= n_libs; i++)
                if ((quoted_header[k], i) in brings && !((quoted_file[k], i) in brings)) {
                    brings[quoted_file[k], i] = quoted_where[k]
                    from[quoted_file[k], i] = "\"" quoted_header[k] "\", which brings " \
                                              from[quoted_header[k], i]
                    more = 1
                }
    } while (more)
    for (pair in brings) {
        split(pair, p, SUBSEP)
        file = p[1]; i = p[2]
        if (!is_test(file) && index(lib_where[i] ",", " " folder(file) ",") == 0 &&
            index(lib_where[i] ",", " " file ",") == 0)
            problem(brings[pair] ": " from[pair] ": " lib_name[i] " belongs to" lib_where[i] \
                    " only")
    }
    close("sort -t: -k1,1 -k2,2n")
    for (pair in edge) {
        split(pair, p, SUBSEP)
        if (p[1] < p[2] && (p[2], p[1]) in edge) {
            print "cycle: " p[1] " and " p[2] " include each other: " edge[p[1], p[2]] \
                  "; " edge[p[2], p[1]]
            problems++
        }
    }
    if (problems > 0) {
        print problems " layering problem(s); the rule is at the top of tests/layering-check.sh"
        exit 1
    }
    print "  LAYERING ok: " includes " includes"
}'
