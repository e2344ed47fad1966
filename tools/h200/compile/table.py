import json, sys
for path in sys.argv[1:]:
    try:
        d = json.load(open(path))
    except Exception as e:
        print("no json", path, e); continue
    for b in d["benchmarks"]:
        e = b["extra_info"]
        print(f'{b["name"][11:-1]:48s} med {b["stats"]["median"]*1e3:8.3f} ms sps {e.get("samples_per_s") or 0:9.1f} busy {e.get("gpu_busy_fraction")} first {e.get("compile_first_call_s")} graphs {e.get("compile_graphs")} breaks {e.get("compile_graph_breaks")} diff {e.get("compile_check_largest_difference")}')
