"""The optimization loop: retrieve -> assemble -> propose -> evaluate -> record."""
