# lightning_ddp.py: PyTorch Lightning with strategy="ddp" (it re-executes this script once per extra device);
# a small MLP regression on random data; rank 0 prints the final loss and wall time as JSON.
#   lightning_ddp.py NDEV [OUT.json] [--share-gpu]
# --share-gpu: all NDEV ranks on cuda:0 (a custom accelerator), each with its own NCCL_HOSTID so NCCL
# accepts two ranks on one GPU (it connects them over NET/Socket); Lightning's re-exec is unchanged.
import json, os, sys, time
T0 = time.time()
SHARE = "--share-gpu" in sys.argv  # left in sys.argv: Lightning re-executes the script with it
ARGS = [a for a in sys.argv[1:] if a != "--share-gpu"]
if SHARE:
    os.environ["NCCL_HOSTID"] = "share-rank%s" % os.environ.get("LOCAL_RANK", "0")
import torch
import lightning as L
from lightning.pytorch.accelerators import CUDAAccelerator


class OneGPU(CUDAAccelerator):
    """Every device Lightning asks for is cuda:0."""
    @staticmethod
    def parse_devices(devices):
        return list(range(int(devices)))

    @staticmethod
    def get_parallel_devices(devices):
        return [torch.device("cuda", 0) for _ in devices]

class M(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 1024))
        self.last = None
    def training_step(self, batch, i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.last = loss.detach()
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-2)

if __name__ == "__main__":
    torch.manual_seed(7)
    x, y = torch.randn(4096, 1024), torch.randn(4096, 1024)
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=128)
    m = M()
    ngpu = int(ARGS[0]) if ARGS else 1
    tr = L.Trainer(accelerator=OneGPU() if SHARE else "gpu", devices=ngpu, strategy="ddp", max_epochs=2, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    tr.fit(m, dl)
    if tr.global_rank == 0:
        out = {"loss": float(m.last), "steps": tr.global_step, "wall_s": time.time() - T0}
        print(json.dumps(out))
        if len(ARGS) > 1:
            open(ARGS[1], "w").write(json.dumps(out))
