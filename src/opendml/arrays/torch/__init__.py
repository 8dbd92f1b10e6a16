"""The PyTorch wing of the array API: ``adapter`` (the routes: kernel, autograd, operator; the first
five operators' custom operators), ``library`` (``opendml::move`` and the registry of the C++
dispatcher operators), ``node`` with ``node.cpp`` (the C++ autograd node and dispatcher operators, built
on first use), ``inductor`` (the direct kernels in Inductor's wrapper) and ``dtypes``. Nothing here is
imported until a PyTorch tensor reaches the array API (or ``opendml.torch`` is imported); this package
imports nothing itself, so ``node``'s build settings can be read without PyTorch.
"""
