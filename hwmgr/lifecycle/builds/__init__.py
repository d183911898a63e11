"""From a vendor package to a module on disk: driver recipes (`recipe`, checked in scratch DKMS
trees by `recipecheck`), SRPMs and vendor tarballs (`srpm`, `tarball`), DKMS (`dkms`) and its
build logs (`buildlog`), module files (`kmod`), a storage driver's initramfs (`initramfs`), the
DKMS RPM (`package`) and the docs its errors name (`advice`).

Imports `source/` (a package is fetched and verified before it is built), never the plan room
or `gate/`.
"""
