"""The clouds' answers as plain data (`facts`), and what a cloud's image names say (`releases`,
`marketplace`). The clients that ask live in `bootimage_controller.cloud`."""
