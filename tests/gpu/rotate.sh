# rotate.sh: sourced by lazy_um_matrix.sh and um_cost.sh: their configurations, NAME=ENV[+ENV...]:ARGS, run REPS
# times each, the order rotated each rep so no configuration keeps one place.
# rotate_specs CALLBACK REPS SPEC...: CALLBACK REP NAME ENVS ARGS for each SPEC, ENVS with "+" between the words.
rotate_specs() {
	local cb=$1 reps=$2
	shift 2
	local r i n=$# spec rest
	for ((r = 0; r < reps; r++)); do
		for ((i = 0; i < n; i++)); do
			spec=${@:$(((i + r) % n + 1)):1}
			rest=${spec#*=}
			"$cb" "$r" "${spec%%=*}" "${rest%%:*}" "${rest#*:}"
		done
	done
}
