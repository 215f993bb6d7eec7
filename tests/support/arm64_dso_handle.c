/* __dso_handle for a test tier's body library in the arm64 cross build
   (cmake/BulwarkTest.cmake): it links no start files (crtbeginS.o, which
   defines it, carries no BTI property), and __cxa_atexit names the object
   whose static destructors it registers by this address. */
void* __dso_handle __attribute__((visibility("hidden"))) = &__dso_handle;
