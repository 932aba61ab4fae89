"""What a build takes in before any image step: the CANN packages (found, checked, unpacked
from their .zip and makeself archives), the source trees of torch_npu and apex checked
against their release, the Debian base images made by debootstrap, and the site's options
(how this site builds: its network, caches, base-image map)."""
