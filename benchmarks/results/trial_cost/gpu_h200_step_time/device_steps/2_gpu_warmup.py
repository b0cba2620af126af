import time, torch
t = time.time()
m = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True), 12).cuda()
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(32, 160, 768, device="cuda")
for _ in range(20):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = m(x).float().mean()
    y.backward(); opt.step(); opt.zero_grad()
torch.cuda.synchronize(); print("GPU warm-up (pages in the CUDA libraries):", round(time.time() - t, 1), "s")
