"""Models page: the local library, hub discovery with per-quant fit/speed predictions, downloads, quantizing.

One module per job: `tables` (the table models), `library_tab`, `discover_tab`, `downloads_panel`,
`quantize_dialog`, and `page` (the page assembled from them, on `page_base`'s shared plumbing).
"""

from app.ui.models_page.page import ModelsPage
from app.ui.models_page.quantize_dialog import QuantizeDialog
from app.ui.models_page.tables import DownloadsModel, LibraryModel, SearchModel, VariantModel

__all__ = ["DownloadsModel", "LibraryModel", "ModelsPage", "QuantizeDialog", "SearchModel", "VariantModel"]
