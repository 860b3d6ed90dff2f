# lightning_ddp.py: PyTorch Lightning with strategy="ddp" (it re-executes this script once per extra device);
# a small MLP regression on random data; rank 0 prints the final loss and wall time as JSON.
import json, os, sys, time
T0 = time.time()
import torch
import lightning as L

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
    ngpu = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    tr = L.Trainer(accelerator="gpu", devices=ngpu, strategy="ddp", max_epochs=2, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    tr.fit(m, dl)
    if tr.global_rank == 0:
        out = {"loss": float(m.last), "steps": tr.global_step, "wall_s": time.time() - T0}
        print(json.dumps(out))
        if len(sys.argv) > 2:
            open(sys.argv[2], "w").write(json.dumps(out))
