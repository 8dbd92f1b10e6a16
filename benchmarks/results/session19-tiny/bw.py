"""Device, versions and measured copy bandwidth (benchmarks.newshape_gpu.copy_bandwidth)."""
import sys, torch
sys.path.insert(0, ".")
from benchmarks.newshape_gpu import copy_bandwidth
print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, python {sys.version.split()[0]}")
print(f"copy bandwidth {copy_bandwidth('cuda'):.0f} GB/s (1 GiB device-to-device, read + write)", flush=True)
