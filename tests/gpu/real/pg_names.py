# pg_names.py: which names torch gives NCCL for its process groups (issue 16 item 7), under torchrun.
# The default group, a new_group with group_desc, and (when this torch's NCCL config has comm_name)
# a group whose options name it; one all_reduce in each. Rank 0 prints what the config offers as JSON.
import json, os
import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
torch.cuda.set_device(dev)
info = {"torch": torch.__version__}
try:
    cfg = dist.ProcessGroupNCCL.Options().config
    info["config_fields"] = sorted(a for a in dir(cfg) if not a.startswith("_"))
except Exception as e:  # noqa: BLE001 -- only reported
    cfg = None
    info["config_error"] = repr(e)
dist.init_process_group("nccl", device_id=dev)
t = torch.ones(1 << 20, device=dev)
dist.all_reduce(t)
g = dist.new_group(list(range(world)), group_desc="tp_group")
dist.all_reduce(t, group=g)
info["group_desc"] = "tp_group"
if cfg is not None and hasattr(cfg, "comm_name"):
    o = dist.ProcessGroupNCCL.Options()
    o.config.comm_name = "dp_named"
    g2 = dist.new_group(list(range(world)), pg_options=o, group_desc="dp_desc")
    dist.all_reduce(t, group=g2)
    info["comm_name"] = "dp_named"
torch.cuda.synchronize()
info["sum"] = float(t[0])
if rank == 0:
    print(json.dumps(info), flush=True)
dist.destroy_process_group()
